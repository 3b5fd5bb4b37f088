"""Networks on a GPU without network measurements: the composition that transfers, and its validation.

A network's time on a GPU the op model never saw is composed from its ops' transferred device
times (model/crossdevice/xdevice.py, CUDA-event units):

    t_net = scale x sum over kernel calls of max(t_op, host_floor)  (+ the optimizer step in training)

`host_floor` is the host's per-op time (no call costs less), `scale` what isolated timings miss in a
running network; in training each op's backward is `bw_ratio[kind]` x its forward. Both are fitted on
the training GPUs' networks only (leave-one-GPU-out refits them), and validated on NeuSight's
end-to-end configs and the thesis networks.
Design: docs/cross-device.md#networks-on-a-transferred-gpu.
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import math
import re
from pathlib import Path
from typing import Any, Mapping, TypedDict

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost import devices
from opcost.devices import NO_TF32_SUFFIX, DeviceConfig, resolve_device_config
from opcost.errors import OpcostError
from opcost.model.crossdevice.hostqueue import step_queue
from opcost.model.crossdevice.hosts import HostProfile
from opcost.model.crossdevice.xdevice import GEMM_XKINDS, OpModel, gpu_of, record_row, xkind_of
from opcost.model.crossdevice.xinterval import other_share

# The optimizer step: SGD with momentum reads parameter, gradient and momentum and writes parameter
# and momentum: 5 x 4 bytes per parameter (foreach kernels; launch cost folded into the floor).
OPTIMIZER_BYTES_PER_PARAM = 20.0
NEUSIGHT_HOST = "neusight"  # NeuSight's measuring host: no host times published, a fitted per-call constant
DEFAULT_BW_RATIO = {"gemm": 2.0, "other": 1.5}  # where no training GPU measured a kind's backward
_LAYER = re.compile(r"\.(?:h|layer|layers|block)\.0'")
_NOKERNEL_METHODS = {"size", "view", "permute", "transpose", "split", "to", "type", "dim", "expand", "reshape",
                     "unsqueeze", "squeeze", "chunk", "flatten", "__getitem__", "unbind", "t"}  # fmt: skip


def _shape(text: Any) -> list[int]:
    try:
        v = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return []
    return [int(x) for x in v] if isinstance(v, (tuple, list)) and all(isinstance(x, int) for x in v) else []


def _shapes(text: Any) -> list[list[int]]:
    try:
        v = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return []
    return [[int(x) for x in s] for s in v if isinstance(s, (list, tuple))] if isinstance(v, list) else []


def fx_node_row(op: str, target: str, cls: str, ins: list[list[int]], out: list[int], dtype: str,
                training: bool) -> dict[str, Any] | None:  # fmt: skip
    """One FX node as a cross-device op row, or None when it launches no GPU kernel."""
    tgt = str(target)
    name = tgt.split(".")[-1] if op == "call_module" else re.sub(r"<(built-in )?(function|method) (\w+).*", r"\3", tgt)
    numel = float(math.prod(out)) if out else 0.0
    if op in ("placeholder", "get_attr", "output") or not out or "float" not in str(dtype):
        return None
    if op == "call_method" and name in _NOKERNEL_METHODS:
        return None
    if op == "call_function" and name in ("getitem", "getattr", "finfo"):
        return None
    kind = cls if op == "call_module" else name
    if op == "call_module":
        if cls == "Dropout":
            if not training:
                return None  # eval-mode dropout is the identity
            kind = "mul"
        elif cls == "Linear" and ins:
            x = ins[0]
            return {"xkind": "linear", "batch": 1.0, "m": float(math.prod(x[:-1])), "n": float(out[-1]),
                    "k": float(x[-1]), "flops": 2.0 * math.prod(x[:-1]) * x[-1] * out[-1],
                    "bytes": 4.0 * (math.prod(x) + x[-1] * out[-1] + out[-1] + numel), "numel": numel}  # fmt: skip
        elif cls == "Embedding":
            kind = "embedding"
    if name == "addmm" and len(ins) >= 3:
        (m, k), n = ins[1][-2:], ins[2][-1]
        return {"xkind": "linear", "batch": 1.0, "m": float(m), "n": float(n), "k": float(k),
                "flops": 2.0 * m * n * k, "bytes": 4.0 * (m * k + k * n + n + m * n), "numel": numel}  # fmt: skip
    if name in ("matmul", "bmm") and len(ins) >= 2 and len(ins[0]) >= 2 and len(ins[1]) >= 2:
        a, b = ins[0], ins[1]
        if len(b) == 2:  # a batch of rows times one matrix: a linear layer without bias
            m, k, n = math.prod(a[:-1]), a[-1], b[-1]
            return {"xkind": "linear", "batch": 1.0, "m": float(m), "n": float(n), "k": float(k),
                    "flops": 2.0 * m * n * k, "bytes": 4.0 * (m * k + k * n + m * n), "numel": numel}  # fmt: skip
        batch, m, k, n = math.prod(a[:-2]), a[-2], a[-1], b[-1]
        return {"xkind": "bmm", "batch": float(batch), "m": float(m), "n": float(n), "k": float(k),
                "flops": 2.0 * batch * m * n * k, "bytes": 4.0 * batch * (m * k + k * n + m * n),
                "numel": numel}  # fmt: skip
    xk = xkind_of(kind)
    if xk in GEMM_XKINDS:  # a GEMM we could not read the shapes of: charged as a bytes-bound op
        xk = "elementwise"
    tensor_in = sum(math.prod(s) for s in ins if math.prod(s) > 1)
    nbytes = 4.0 * (tensor_in + numel) if kind != "embedding" else 8.0 * numel
    return {"xkind": xk, "batch": 1.0, "m": 0.0, "n": 0.0, "k": 0.0, "flops": 0.0, "bytes": nbytes, "numel": numel}


def neusight_networks(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(networks, nodes) of NeuSight's end-to-end configs that have a per-node CSV (no `-fusion`).
    networks: gpu, device_config, config, model, mode, num_layer, measured_s (e2e), fw_s, bw_s.
    nodes: config, gpu, reps (num_layer for the repeated layer, else 1), the op row, fw_s, bw_s."""
    nets, nodes = [], []
    root = Path(folder) / "networks"
    if not root.is_dir():
        raise OpcostError(f"{root} not found: NeuSight's networks (ingest@neusight) are needed")
    for js in sorted(root.glob("*/*.json")):
        if js.stem.endswith("-fusion"):
            continue
        csv = js.with_suffix("").with_suffix(".csv.gz") if js.suffix == ".json" else None
        csv = js.parent / (js.stem + ".csv.gz")
        if not csv.is_file():
            continue
        meta = json.loads(js.read_text())
        model, mode, seq, batch = js.stem.rsplit("-", 3)
        training = mode == "train"
        with gzip.open(csv, "rt") as fh:
            d = pd.read_csv(io.StringIO(fh.read()))
        product = str(js.parent.name).replace("_", " ")
        cfg = _neusight_gpu(js.parent.name) + NO_TF32_SUFFIX
        gpu = gpu_of(cfg)
        config = f"{gpu}/{js.stem}"
        nets.append({"gpu": gpu, "device_config": cfg, "config": config, "model": model, "set": "neusight",
                     "mode": "training" if training else "inference", "num_layer": int(meta["num_layer"]),
                     "measured_s": float(meta["e2e_latency"]) * 1e-3, "params": 0.0,
                     "product": product, "host": NEUSIGHT_HOST})  # fmt: skip
        cls = d["meta"].astype(str).str.findall(r"<class '([^']+)'>").str[-1].fillna("").str.split(".").str[-1]
        layer = d["meta"].astype(str).str.contains(_LAYER)
        for i, r in d.iterrows():
            row = fx_node_row(str(r["op"]), str(r["target"]), str(cls[i]), _shapes(r["input_shapes"]),
                              _shape(r["output_shape"]), str(r["dtype"]), training)  # fmt: skip
            if row is None:
                continue
            reps = int(meta["num_layer"]) if layer[i] else 1
            fw = float(r["fw_latency"]) * 1e-3 if pd.notna(r["fw_latency"]) else np.nan
            bw = (float(r["bw_latency"] or 0) + float(r["acc_latency"] or 0)) * 1e-3 if training else np.nan
            nodes.append({**row, "config": config, "gpu": gpu, "device_config": cfg, "calls": float(reps),
                          "measured_fw_s": fw, "measured_bw_s": bw})  # fmt: skip
    return pd.DataFrame(nets), pd.DataFrame(nodes)


def _neusight_gpu(folder_name: str) -> str:
    """NeuSight's folder names are NVML names with '_' for ' ' in places (Tesla_V100-PCIE-32GB)."""
    for cand in (folder_name, folder_name.replace("_", " "), folder_name.replace("_", " ", 1)):
        try:
            return resolve_device_config(cand)
        except OpcostError:
            continue
    raise OpcostError(f"NeuSight GPU {folder_name!r} is not in the device table (opcost/devices.py)")


def thesis_networks(paths: Any, targets: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(networks, nodes) of the thesis' measured networks of each `<config>-<mode>` target."""
    from opcost.model.basis.features import record_of
    from opcost.schemas import TARGET_NETWORK_OPS, TARGET_NETWORKS
    from opcost.tables import read_table

    nets, nodes = [], []
    for target in targets:
        cfg, _, mode = target.rpartition("-")
        if not Path(paths.target_networks(target)).is_file():
            continue
        n = read_table(paths.target_networks(target), TARGET_NETWORKS, "evaluate")
        ops = read_table(paths.target_network_ops(target), TARGET_NETWORK_OPS, "evaluate")
        gpu = gpu_of(cfg)
        for r in n.itertuples():
            config = f"{cfg}/{mode}/{r.set_id}"
            sel = ops[ops["set_id"] == r.set_id]
            params = 0.0
            for _, o in sel.iterrows():
                if bool(o["is_view"]):
                    continue
                rec = record_of(o)
                params += float(o["params"]) * float(o["calls"])
                for row, count in op_rows(rec):
                    nodes.append({**row, "config": config, "gpu": gpu, "device_config": cfg, "kind": rec.kind,
                                  "calls": float(o["calls"]) * count, "measured_fw_s": np.nan,
                                  "measured_bw_s": np.nan})  # fmt: skip
            nets.append({"gpu": gpu, "device_config": cfg, "config": config, "model": r.model, "set": "thesis",
                         "mode": mode, "num_layer": 1, "measured_s": float(r.t_s), "params": params,
                         "product": "", "host": thesis_host(cfg)})  # fmt: skip
    return pd.DataFrame(nets), pd.DataFrame(nodes)


# -- composition ---------------------------------------------------------------------------------------
def op_rows(rec: Any) -> list[tuple[dict[str, Any], float]]:
    """A network op as cross-device rows with their counts per call of the op: the op itself, or, where
    it is costed from the kernels it runs (ops/parts.py; ops/kinds.has_parts), one row per kernel.
    Composites (multi-head attention, SDPA, Swin's window attention), kinds no op category knows
    (Hugging Face's `Conv1D`, an addmm) and recurrent layers (each step's GEMMs and gate kernels, `count`
    times) would, as one row, be costed as what their name resembles: `Conv1D` as a convolution at the
    tensor-core convolution peak, attention as its projections alone, an LSTM as one short kernel.
    A matrix product is the linear layer of its GEMM (model/composition/costing.part_record), as own bundles cost it."""
    from opcost.model.basis.features import part_record
    from opcost.ops.kinds import has_parts

    parts = rec.metrics.get("parts") if has_parts(rec.kind) else None
    if not parts:
        return [(record_row(rec.kind, rec.metrics, rec.hp, rec.input_shape), 1.0)]
    out = []
    for k, p in enumerate(parts):
        pr = part_record(rec, k, p)
        out.append((record_row(pr.kind, pr.metrics, pr.hp, pr.input_shape), float(p.get("count", 1))))
    return out


def bw_ratios(nodes: pd.DataFrame, gpus: set[str]) -> dict[str, float]:
    """Median backward/forward time per kind over the measured nodes of `gpus` (NeuSight per-node)."""
    d = nodes[nodes["gpu"].isin(gpus) & nodes["measured_bw_s"].notna() & (nodes["measured_fw_s"] > 0)]
    return {str(k): float(np.median(g["measured_bw_s"] / g["measured_fw_s"])) for k, g in d.groupby("xkind")}


def bw_ratio(ratios: dict[str, float], xkind: str) -> float:
    if xkind in ratios:
        return ratios[xkind]
    return DEFAULT_BW_RATIO["gemm" if xkind in GEMM_XKINDS else "other"]


def thesis_host(device_config: str) -> str:
    """The host profile (model/crossdevice/hosts.py) of the thesis machine that measured `device_config`."""
    return f"thesis-{gpu_of(device_config)}"


def op_time(
    t_fw: npt.NDArray[np.float64],
    xkinds: npt.NDArray[np.object_],
    mode: str,
    comp: Mapping[str, Any],
    host_s: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Per-call time of each op shown in an answer: forward (and backward) each at least its host cost
    (`host_s` per op). The network's time is the queue's (model/crossdevice/hostqueue.py), not the sum of these."""
    h = np.asarray(host_s, np.float64)
    t = np.maximum(t_fw, h)
    if mode == "training":
        r = np.array([bw_ratio(comp.get("bw_ratio", {}), x) for x in xkinds])
        t = t + np.maximum(r * t_fw, h * float(comp.get("bw_host_factor", 1.0)))
    return t


def steps_optimizer(mode: str, params: float) -> bool:
    """Whether a step runs an optimizer step: training, with parameters to update."""
    return mode == "training" and params > 0


def optimizer_s(mode: str, params: float, found: DeviceConfig) -> float:
    """The optimizer step of a training step: bytes-bound at the device's bandwidth."""
    if not steps_optimizer(mode, params):
        return 0.0
    return OPTIMIZER_BYTES_PER_PARAM * params / found.device.bandwidth


HOST_FLOOR_GRID = tuple(float(x) for x in np.geomspace(1e-6, 4e-5, 40))  # NeuSight's host: no host times published
BW_HOST_GRID = (0.1, 0.25, 0.5, 1.0)  # a backward call's host cost over its forward call's
# A call's host cost in a running network over its profile's: a profile measured on isolated ops (a loop of one
# op's calls, the thesis' plateaus, the visit's enqueue times) carries per-call work a network step does not
# repeat. Fitted on the training GPUs' networks: one factor for every host, never one host's own.
IN_NETWORK_GRID = tuple(float(x) for x in np.geomspace(0.05, 1.0, 9))


def profiles(comp: Mapping[str, Any]) -> dict[str, HostProfile]:
    """The host profiles a composition carries (model/crossdevice/hosts.py), by name."""
    return {n: HostProfile.from_json(d, f"host profile {n}") for n, d in comp.get("hosts", {}).items()}


# A network as `_prepared` gives it: (measured [s], forward times, backward ratios or None, calls, optimizer
# seconds, host costs per node or None)
Prepared = tuple[
    float,
    npt.NDArray[np.float64],
    npt.NDArray[np.float64] | None,
    npt.NDArray[np.float64],
    float,
    npt.NDArray[np.float64] | None,
]


def _prepared(nets: pd.DataFrame, nodes: pd.DataFrame, t_fw: npt.NDArray[np.float64], ratios: dict[str, float],
              hosts: dict[str, HostProfile]) -> list[Prepared]:  # fmt: skip
    """Per network: (measured, forward times, backward ratios or None, calls, optimizer seconds, host costs
    per node or None where its host has no profile: the fitted per-call constant stands in)."""
    cfg = nodes["config"].to_numpy()
    xk = nodes["xkind"].to_numpy()
    calls = nodes["calls"].to_numpy(float)
    out: list[Prepared] = []
    for r in nets.itertuples():
        idx = np.flatnonzero(cfg == r.config)
        ratio = np.array([bw_ratio(ratios, x) for x in xk[idx]]) if r.mode == "training" else None
        host = hosts.get(str(getattr(r, "host", "")))
        h = None if host is None else host.costs(xk[idx])
        # only an optimizer step needs the device resolved (an inference row may name a GPU the table lacks)
        stepped = steps_optimizer(r.mode, r.params)
        opt = optimizer_s(r.mode, r.params, devices.device_config(r.device_config)) if stepped else 0.0
        out.append((r.measured_s, t_fw[idx], ratio, calls[idx], opt, h))
    return out


def _compose(
    prep: list[Prepared], h: float, bw_host: float, scale: float, in_network: float = 1.0
) -> npt.NDArray[np.float64]:
    res = []
    for _, t, ratio, calls, opt, host in prep:
        hs = np.full(len(t), h) if host is None else in_network * host
        res.append(scale * step_queue(t, calls, hs, ratio, bw_host).time_s + opt)
    return np.array(res)


class FittedComposition(TypedDict):
    """The network composition `fit_composition` fits; models/xdevice/ keeps it as the model's `composition`."""

    host_floor_s: float  # the per-call host constant of hosts without a profile
    bw_host_factor: float  # a backward call's host cost over its forward call's
    scale: float
    in_network: float  # a profile's host costs in a running network over the profile's
    bw_ratio: dict[str, float]  # backward / forward time per kind (`bw_ratios`)
    hosts: dict[str, dict[str, Any]]  # host profiles by name (HostProfile.to_json)


def fit_composition(nets: pd.DataFrame, nodes: pd.DataFrame, t_fw: npt.NDArray[np.float64], ratios: dict[str, float],
                    hosts: dict[str, HostProfile] | None = None) -> FittedComposition:  # fmt: skip
    """The per-call host constant of hosts without a profile (HOST_FLOOR_GRID), the in-network share of a
    profile's host costs (IN_NETWORK_GRID), the backward calls' host share (BW_HOST_GRID) and scale (median of
    log measured/composed) minimising the mean |log error| over `nets` (training GPUs only), each network
    equally weighted; each network's step runs through the host/GPU queue with its own host's profile
    (model/crossdevice/hostqueue.py, model/crossdevice/hosts.py). A network's queue depends on one host multiplier (h or
    the in-network share) and the backward share, so each is run once per pair, not once per grid point."""
    hosts = dict(hosts or {})
    prep = _prepared(nets, nodes, np.asarray(t_fw, np.float64), ratios, hosts)
    measured = np.array([p[0] for p in prep])
    profiled = np.array([p[5] is not None for p in prep], bool)
    h_grid = HOST_FLOOR_GRID if (~profiled).any() else HOST_FLOOR_GRID[:1]
    k_grid = IN_NETWORK_GRID if profiled.any() else IN_NETWORK_GRID[-1:]
    n, nb = len(prep), len(BW_HOST_GRID)
    q_h, q_k, opt = np.zeros((n, len(h_grid), nb)), np.zeros((n, len(k_grid), nb)), np.zeros(n)
    for j, (_, t, ratio, calls, o, host) in enumerate(prep):
        opt[j] = o
        for ib, bwh in enumerate(BW_HOST_GRID):
            if host is None:
                q_h[j, :, ib] = [step_queue(t, calls, np.full(len(t), h), ratio, bwh).time_s for h in h_grid]
            else:
                q_k[j, :, ib] = [step_queue(t, calls, k * host, ratio, bwh).time_s for k in k_grid]
    best: tuple[float, ...] | None = None
    for ih, h in enumerate(h_grid):
        for ik, kappa in enumerate(k_grid):
            for ib, bwh in enumerate(BW_HOST_GRID):
                q = np.where(profiled, q_k[:, ik, ib], q_h[:, ih, ib])
                scale = float(np.exp(np.median(np.log(measured / np.maximum(q + opt, 1e-12)))))
                err = float(np.mean(np.abs(np.log(measured / np.maximum(scale * q + opt, 1e-12)))))
                if best is None or err < best[0]:
                    best = (err, h, bwh, scale, kappa)
    assert best is not None
    return {"host_floor_s": best[1], "bw_host_factor": best[2], "scale": best[3], "in_network": best[4],
            "bw_ratio": ratios, "hosts": {n: p.to_json() for n, p in sorted(hosts.items())}}  # fmt: skip


def predict_nets(
    nets: pd.DataFrame, nodes: pd.DataFrame, t_fw: npt.NDArray[np.float64], comp: Mapping[str, Any]
) -> npt.NDArray[np.float64]:
    prep = _prepared(nets, nodes, np.asarray(t_fw, np.float64), comp.get("bw_ratio", {}), profiles(comp))
    return _compose(prep, float(comp["host_floor_s"]), float(comp.get("bw_host_factor", 1.0)), float(comp["scale"]),
                    float(comp.get("in_network", 1.0)))  # fmt: skip


def logo_networks(nets: pd.DataFrame, nodes: pd.DataFrame, fold_models: dict[str, OpModel],
                  hosts: dict[str, HostProfile] | None = None) -> pd.DataFrame:  # fmt: skip
    """Every network of each held-out GPU predicted with the op model and composition fitted without it.
    Host profiles are the measuring hosts' (what a user names with --host or measures with calibrate-host):
    a held-out GPU's networks run through its own host's profile, never through anything fitted on it."""
    out = []
    for g, model in fold_models.items():
        held = nets[nets["gpu"] == g]
        if held.empty:
            continue
        comp = fold_composition(nets, nodes, g, model, hosts)
        te_nodes = nodes[nodes["config"].isin(held["config"])].reset_index(drop=True)
        t_fw = model.predict(device_rows(te_nodes))
        pred = predict_nets(held.reset_index(drop=True), te_nodes, t_fw, comp)
        share = {c: other_share(d["xkind"], t_fw[d.index], d["calls"]) for c, d in te_nodes.groupby("config")}
        out.append(held.assign(predicted_s=pred, host_floor_s=comp["host_floor_s"], scale=comp["scale"],
                               bw_host_factor=comp["bw_host_factor"], in_network=comp["in_network"],
                               other_share=held["config"].map(share).fillna(1.0)))  # fmt: skip
    df = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    if len(df):
        df["error_pct"] = 100 * (df["predicted_s"] / df["measured_s"] - 1)
    return df


def fold_composition(nets: pd.DataFrame, nodes: pd.DataFrame, gpu: str, model: OpModel,
                     hosts: dict[str, HostProfile] | None = None) -> FittedComposition:  # fmt: skip
    """The composition fitted on every GPU's networks but `gpu`'s, with op times of `model` (its fold's)."""
    train = nets[nets["gpu"] != gpu]
    tr_nodes = nodes[nodes["config"].isin(train["config"])].reset_index(drop=True)
    ratios = bw_ratios(nodes, set(model.trained_on))
    return fit_composition(train.reset_index(drop=True), tr_nodes, model.predict(device_rows(tr_nodes)), ratios, hosts)


def device_rows(nodes: pd.DataFrame) -> pd.DataFrame:
    """Nodes as op rows in device time (CUDA-event units): the host floor is the composition's."""
    return nodes.assign(wall_clock=0.0)


def net_scores(df: pd.DataFrame) -> dict[str, float]:
    """Network errors of rows `df` (measured_s, predicted_s): count, MAPE, median APE, time-weighted error
    and the largest APE, in per cent."""
    ape = (df["predicted_s"] / df["measured_s"] - 1).abs()
    return {
        "n": int(len(df)),
        "mape": float(100 * ape.mean()),
        "mdape": float(100 * ape.median()),
        "twe": float(100 * (df["predicted_s"] - df["measured_s"]).abs().sum() / df["measured_s"].sum()),
        "max_ape": float(100 * ape.max()),
    }
