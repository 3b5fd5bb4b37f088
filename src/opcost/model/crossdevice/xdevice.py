"""Op time on any GPU of the device table: one model over the op's features and the device's.

Every op measured on any GPU becomes one row (its kind, FLOPs, bytes, GEMM shape and the figures of
the device config it ran on), and the trees learn log(t / (roofline + floor)) with the roofline in
the device's own units, so a GPU the trees never saw is described by where its ops sit against its
hardware, not by its name. `wall_clock` says how a row was timed; transferred answers are asked in
device time, and thesis rows that time only the host are left out of the fit (`host_bound`).
Nothing here is tuned to a held-out GPU: `leave_one_gpu_out` fits through `fit_fn` on the others.
Design: docs/cross-device.md#the-model.
"""

from __future__ import annotations

import functools
import gzip
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost import devices
from opcost.data import floors
from opcost.devices import NO_TF32_SUFFIX, Device, DeviceConfig, resolve_device
from opcost.errors import OpcostError
from opcost.io import read_json_model, read_npz, write_json, write_npz
from opcost.model.basis import physics
from opcost.model.basis.trees import TreeEnsemble
from opcost.ops.kinds import xkind_of
from opcost.params.xdevice import XdeviceParams

FORMAT = "opcost-xdevice/2"
MODEL_FILE = "xdevice.json"
TREES_FILE = "trees.npz"
_ARRAYS = {"feature": np.int32, "threshold": np.float64, "left": np.int32, "right": np.int32, "value": np.float64}

# The kinds the cross-device model distinguishes (every op maps to one, `xkind`).
XKINDS = ("linear", "bmm", "conv", "layernorm", "softmax", "gelu", "add", "mul", "relu", "batchnorm", "pool",
          "elementwise")  # fmt: skip
GEMM_XKINDS = frozenset({"linear", "bmm", "conv"})
# Report groups: NeuSight's per-op table (FC = linear, elementwise = gelu, add, mul, relu).
REPORT_GROUP = {"linear": "linear", "bmm": "bmm", "conv": "conv", "layernorm": "layernorm", "softmax": "softmax",
                "gelu": "elementwise", "add": "elementwise", "mul": "elementwise", "relu": "elementwise",
                "elementwise": "elementwise", "batchnorm": "batchnorm", "pool": "pool"}  # fmt: skip
# NeuSight's out-of-distribution per-op errors (ASPLOS'25, Table 5), the anchor of each report group.
NEUSIGHT_OOD_MAPE = {"bmm": 13.8, "linear": 13.9, "elementwise": 19.3, "softmax": 13.9, "layernorm": 56.7}
GOAL_MAPE = {"linear": 12.0, "bmm": 12.0, "conv": 12.0}  # every other group: 20 %
GOAL_OTHER = 20.0

HOST_PLATEAU_ROWS = 5  # wall-clock rows of a config and kind before its plateau is estimated (host_bound)
TILE = 128  # GEMM output tile edge for the wave estimate (cuBLAS/cuDNN fp32 kernels use 64..128)
THREADS_PER_SM = 2048  # resident threads per SM (Pascal..Hopper)
ELEMS_PER_THREAD = 4  # vectorised elementwise kernels (float4)
FLOAT_BYTES = 4

COLUMNS = (
    [f"kind={k}" for k in XKINDS]
    + ["wall_clock", "log_flops", "log_bytes", "log_numel", "log_intensity", "log_ridge", "log_intensity_over_ridge",
       "log_compute_s", "log_memory_s", "log_roofline_s", "compute_bound", "log_m", "log_n", "log_k", "log_batch",
       "log_waves", "wave_efficiency", "log_bytes_over_l2", "log_peak", "log_fp32_peak", "log_bandwidth", "sms",
       "log_l2", "clock_mhz", "tensor_cores", "winograd_fp32"]
)  # fmt: skip


# -- devices ------------------------------------------------------------------------------------
# Table entries that are one chip in another board (same SMs, clocks and L2; other memory): one GPU
# for leave-one-GPU-out, so that NeuSight's A100 80 GB convolutions do not score on a model that saw
# its A100 40 GB rows.
SAME_CHIP = {"A100_PCIe_40GB": "A100_PCIe"}


def gpu_of(device_config: str) -> str:
    """The GPU a device config runs on (the unit of leave-one-GPU-out: A30 and A30_no_tf32 go together)."""
    name = devices.device_config(device_config).device.name
    return SAME_CHIP.get(name, name)


def op_peak(xkind: str, dev: Device, tf32: bool) -> float:
    """The FP32 peak that applies under PyTorch's defaults: physics.peak_of decides it for every model
    (TF32 tensor cores for cuDNN convolutions where allowed; matmuls, linear and bmm, on the FP32 units)."""
    return physics.peak_of(xkind, dev, tf32)


def device_vector(dev: Device) -> np.ndarray:
    """What distance between GPUs is measured in: log FP32 peak, bandwidth, SMs, L2, clock, TF32."""
    return np.array(
        [math.log(dev.fp32_flops), math.log(dev.bandwidth), math.log(dev.sms), math.log(dev.l2_bytes),
         math.log(dev.boost_clock_mhz), float(dev.tf32_flops is not None)]
    )  # fmt: skip


def distance(dev: Device, others: Iterable[Device]) -> float:
    """Euclidean distance in `device_vector` space to the nearest of `others` (log units)."""
    v = device_vector(dev)
    ds = [float(np.linalg.norm(v - device_vector(o))) for o in others if o.name != dev.name]
    return min(ds) if ds else float("inf")


# -- op rows --------------------------------------------------------------------------------------
def _gemm_frame(xkind: str, batch: Any, m: Any, n: Any, k: Any, flops: Any, nbytes: Any) -> dict[str, Any]:
    return {"xkind": xkind, "batch": batch, "m": m, "n": n, "k": k, "flops": flops, "bytes": nbytes}


def neusight_ops(folder: Path) -> pd.DataFrame:
    """NeuSight's per-kernel rows (ops/<op>/<GPU>.csv.gz) as cross-device rows. Shapes as its collector
    built them (datasets README): bmm B x M x N @ B x N x K; linear nn.Linear(N, K) on B x M x N;
    conv nn.Conv2d(Cin, Cout, k, stride, padding, bias=False) on B x Cin x S x S; the rest B x H."""
    frames = []
    ops_dir = Path(folder) / "ops"
    if not ops_dir.is_dir():
        raise OpcostError(f"{ops_dir} not found: NeuSight's ops (ingest@neusight / data/external/neusight) are needed")
    for f in sorted(ops_dir.glob("*/*.csv.gz")):
        op = f.parent.name
        with gzip.open(f, "rt") as fh:
            raw = pd.read_csv(io.StringIO(fh.read()))
        t = raw["Latency"].to_numpy(float) * 1e-3
        product = str(raw["Device"].iloc[0])
        if op in ("bmm", "linear"):
            B, M, N, K = (raw[c].to_numpy(float) for c in ("B", "M", "N", "K"))
            if op == "bmm":  # rows M, cols K, reduction N, batch B
                d = _gemm_frame("bmm", B, M, K, N, 2 * B * M * N * K, FLOAT_BYTES * B * (M * N + N * K + M * K))
            else:  # rows B*M, cols K, reduction N; weight N*K and bias K
                d = _gemm_frame("linear", np.ones_like(B), B * M, K, N, 2 * B * M * N * K + B * M * K,
                                FLOAT_BYTES * (B * M * N + N * K + K + B * M * K))  # fmt: skip
        elif op == "conv":
            B, cin, cout, ks, size, st, pad = (
                raw[c].to_numpy(float)
                for c in ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding")
            )
            out = np.floor((size + 2 * pad - ks) / st) + 1
            m, n, k = B * out * out, cout, cin * ks * ks
            d = _gemm_frame(
                "conv",
                np.ones_like(B),
                m,
                n,
                k,
                2 * m * n * k,
                FLOAT_BYTES * (B * cin * size * size + cout * cin * ks * ks + B * cout * out * out),
            )
            d["winograd"] = ((ks == 3) & (st == 1)).astype(float)  # NeuSight's convolutions: ungrouped, undilated
        else:
            B, H = raw["B"].to_numpy(float), raw["H"].to_numpy(float)
            numel = B * H
            xk = {"ln": "layernorm", "softmax": "softmax", "gelu": "gelu", "relu": "relu", "add": "add",
                  "mul": "mul"}[op]  # fmt: skip
            reads = 2 if op in ("add", "mul") else 1
            extra = 2 * H if op == "ln" else 0
            zero = 0 * B
            d = _gemm_frame(xk, np.ones_like(B), zero, zero, zero, zero, FLOAT_BYTES * ((reads + 1) * numel + extra))
            d["numel"] = numel
        df = pd.DataFrame(d)
        if "numel" not in df:
            df["numel"] = df["m"] * df["n"] * df["batch"]
        df["t_s"] = t
        df["device_config"] = resolve_device(product) + NO_TF32_SUFFIX  # NeuSight: TF32 off
        df["wall_clock"] = 0.0
        df["source"] = "neusight"
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out = out[np.isfinite(out["t_s"]) & (out["t_s"] > 0)]
    return out.reset_index(drop=True)


def record_row(kind: str, metrics: dict[str, Any], hp: dict[str, Any], input_shape: Sequence[int]) -> dict[str, Any]:
    """A project op (its kind, paper costs, hyper-parameters and input shape) as a cross-device row."""
    from opcost.model.basis.gemm import kernel_features
    from opcost.model.basis.physics import gemm_dims

    xk = xkind_of(kind)
    outs = [list(s) for s in metrics.get("output_shapes", [])]
    out_numel = float(sum(math.prod(int(x) for x in s) for s in outs)) if outs else 0.0
    nbytes = float(metrics["bytes_read"]) + float(metrics["bytes_written"])
    flops = float(metrics["flops"])
    m = n = k = 0.0
    batch = 1.0
    if xk in GEMM_XKINDS:
        m, n, k = gemm_dims(kind, hp, tuple(input_shape), outs)
        if m == 0 and outs and len(outs[0]) >= 2:  # matmul-like: output [..., M, N], K from the FLOPs
            o = [int(x) for x in outs[0]]
            batch = float(math.prod(o[:-2])) if len(o) > 2 else 1.0
            m, n = float(o[-2]), float(o[-1])
            k = flops / max(2.0 * batch * m * n, 1.0)
        elif m and xk == "conv" and hp.get("groups", 1) not in (1, None):
            batch = float(int(hp["groups"]))
    else:
        flops = 0.0  # bytes-bound kinds: the FLOP counts of different tools disagree, bytes do not
    winograd = float(xk == "conv" and kernel_features(kind, hp)[3] == 1.0)
    return {"xkind": xk, "batch": batch, "m": m, "n": n, "k": k, "flops": flops, "bytes": nbytes,
            "numel": out_numel, "winograd": winograd}  # fmt: skip


def thesis_ops(table: pd.DataFrame, device_config: str) -> pd.DataFrame:
    """A target operations table (schemas.TARGET_OPERATIONS) of measured ops as cross-device rows:
    views, no-ops and estimated rows left out (a view or a no-op costs the floor; an estimate is not a
    measurement). No-ops: StochasticDepth in eval mode returns its input, yet its row carries the bytes of
    an add; the thesis timed it at 3-8 us against a 110-490 us roofline, which taught the trees that an
    add can run 40x under its bytes."""
    from opcost.model.basis.features import record_of

    keep = table[~table["estimated"].astype(bool) & ~table["is_view"].astype(bool) & (table["t_s"] > 0)]
    rows = []
    for _, r in keep.iterrows():
        rec = record_of(r)
        if physics.is_noop(rec.kind, rec.hp, rec.metrics, str(r["mode"])):
            continue
        rows.append({**record_row(rec.kind, rec.metrics, rec.hp, rec.input_shape), "t_s": float(r["t_s"])})
    df = pd.DataFrame(rows)
    df["device_config"] = device_config
    df["wall_clock"] = 1.0
    df["source"] = "thesis"
    return df


# -- features ------------------------------------------------------------------------------------
def design(
    rows: pd.DataFrame, floor_s: float, found: DeviceConfig | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(X, log(roofline + floor)) of cross-device rows; X's columns are COLUMNS. `found`: the resolved
    device config of the rows named `found.name` (an answer's), not looked up again."""
    n = len(rows)
    X = np.zeros((n, len(COLUMNS)))
    offset = np.zeros(n)
    col = {c: i for i, c in enumerate(COLUMNS)}
    devs = {
        c: found if found is not None and c == found.name else devices.device_config(c)
        for c in rows["device_config"].unique()
    }
    xk = rows["xkind"].to_numpy()
    for k in XKINDS:
        X[:, col[f"kind={k}"]] = xk == k
    X[:, col["wall_clock"]] = rows["wall_clock"].to_numpy(float)
    flops = rows["flops"].to_numpy(float)
    nbytes = np.maximum(rows["bytes"].to_numpy(float), 1.0)
    numel = np.maximum(rows["numel"].to_numpy(float), 1.0)
    m, nn, kk = (rows[c].to_numpy(float) for c in ("m", "n", "k"))
    batch = np.maximum(rows["batch"].to_numpy(float), 1.0)
    cfg = rows["device_config"].to_numpy()
    peak = np.zeros(n)
    fp32, bw, sms, l2, clock, tc = (np.zeros(n) for _ in range(6))
    for c, (dev, tf32) in devs.items():
        sel = cfg == c
        peak[sel] = [op_peak(x, dev, tf32) for x in xk[sel]]
        fp32[sel], bw[sel], sms[sel] = dev.fp32_flops, dev.bandwidth, dev.sms
        l2[sel], clock[sel] = dev.l2_bytes, dev.boost_clock_mhz
        tc[sel] = float(dev.tf32_flops is not None and tf32)
    compute = flops / peak
    memory = nbytes / bw
    roof = np.maximum(np.maximum(compute, memory), 1e-9)
    intensity = flops / nbytes
    ridge = peak / bw
    gemm = np.isin(xk, list(GEMM_XKINDS))
    tiles = np.where(gemm, batch * np.ceil(np.maximum(m, 1) / TILE) * np.ceil(np.maximum(nn, 1) / TILE), 0.0)
    blocks = np.where(gemm, tiles, np.ceil(numel / (ELEMS_PER_THREAD * 256.0)))
    waves = blocks / (sms * np.where(gemm, 1.0, THREADS_PER_SM / 256.0))
    X[:, col["log_flops"]] = np.log1p(flops)
    X[:, col["log_bytes"]] = np.log(nbytes)
    X[:, col["log_numel"]] = np.log(numel)
    X[:, col["log_intensity"]] = np.log1p(intensity)
    X[:, col["log_ridge"]] = np.log(ridge)
    X[:, col["log_intensity_over_ridge"]] = np.log((intensity + 1e-3) / ridge)
    X[:, col["log_compute_s"]] = np.log(compute + 1e-12)
    X[:, col["log_memory_s"]] = np.log(memory + 1e-12)
    X[:, col["log_roofline_s"]] = np.log(roof)
    X[:, col["compute_bound"]] = compute >= memory
    X[:, col["log_m"]], X[:, col["log_n"]], X[:, col["log_k"]] = np.log1p(m), np.log1p(nn), np.log1p(kk)
    X[:, col["log_batch"]] = np.log(batch)
    X[:, col["log_waves"]] = np.log(waves + 1e-6)
    X[:, col["wave_efficiency"]] = np.where(waves > 0, waves / np.maximum(np.ceil(waves), 1.0), 0.0)
    X[:, col["log_bytes_over_l2"]] = np.log(nbytes / l2)
    X[:, col["log_peak"]], X[:, col["log_fp32_peak"]] = np.log(peak), np.log(fp32)
    X[:, col["log_bandwidth"]], X[:, col["sms"]], X[:, col["log_l2"]] = np.log(bw), sms, np.log(l2)
    X[:, col["clock_mhz"]], X[:, col["tensor_cores"]] = clock, tc
    wino = rows["winograd"].fillna(0.0).to_numpy(float) if "winograd" in rows else np.zeros(n)
    X[:, col["winograd_fp32"]] = wino * (peak <= fp32)  # TF32 convolutions run implicit GEMM, not Winograd
    offset[:] = np.log(roof + floor_s)
    return X, offset


# -- fitting ---------------------------------------------------------------------------------------
def fit_trees(X: np.ndarray, y: np.ndarray, p: XdeviceParams, w: np.ndarray | None = None) -> TreeEnsemble:
    """XGBoost on (X, y), compiled to arrays (model/basis/trees.py) so that prediction needs no XGBoost."""
    import xgboost as xgb

    from opcost.model.basis.trees import compile_ensemble

    model = xgb.XGBRegressor(
        n_estimators=p.n_estimators, max_depth=p.max_depth, learning_rate=p.learning_rate, subsample=p.subsample,
        colsample_bytree=p.colsample_bytree, min_child_weight=p.min_child_weight, random_state=p.seed,
        n_jobs=p.threads, tree_method="hist", objective="reg:squarederror",
    )  # fmt: skip
    model.fit(X, y, sample_weight=w)
    return compile_ensemble(model, X[: min(len(X), 2000)])


def weights(rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Every (GPU, kind) pair weighs the same in the fit: NeuSight's 17 000 bmm shapes per GPU do not
    drown the thesis' few hundred convolutions, nor one GPU the others."""
    key = rows["device_config"].map(gpu_of).astype(str) + "|" + rows["xkind"].astype(str)
    counts = key.map(key.value_counts())
    w: npt.NDArray[np.float64] = (1000.0 / counts.to_numpy(float)).astype(float)
    return w  # typed here: pandas has no type information


FitFn = Callable[[pd.DataFrame, XdeviceParams], "OpModel"]


ROW_SOURCES = {"neusight": "NeuSight", "thesis": "the thesis"}  # who measured a training row (its `source`)


@dataclass
class OpModel:
    """A fitted cross-device op-time model: predict t for rows on any table device config."""

    ensemble: TreeEnsemble
    floor_s: float
    trained_on: tuple[str, ...]  # GPUs (table keys)
    # GPU -> {row source: rows fitted on}: how many of a GPU's own measured ops the model saw, and whose
    # (ROW_SOURCES); an answer on such a GPU is an in-sample fit (costing.FITTED). Empty: a model saved before.
    trained_rows: dict[str, dict[str, int]] = field(default_factory=dict)

    def predict(self, rows: pd.DataFrame, found: DeviceConfig | None = None) -> npt.NDArray[np.float64]:
        """Op times of `rows`; `found`: the resolved device config of an answer's rows (`design`)."""
        if len(rows) == 0:
            return np.zeros(0)
        X, off = design(rows, self.floor_s, found)
        return np.exp(self.ensemble.predict(X) + off)

    @functools.cached_property
    def trained_devices(self) -> list[Device]:
        """The devices of `trained_on`, resolved once per loaded model (an answer's distance reads them)."""
        return [devices.device_config(g).device for g in self.trained_on]


def host_bound(rows: pd.DataFrame, factor: float) -> np.ndarray:
    """Which wall-clock rows time the host, not the GPU: per device config and kind (at least
    HOST_PLATEAU_ROWS wall-clock rows), the plateau h is the floors.FLOOR_PERCENTILE-th percentile of their
    times, and a row is host-bound where t <= factor x h.

    Why: the thesis timed each op by wall clock over a loop of calls, so a call costs max(kernel, host's
    per-call time). Its small calls sit on a flat plateau per kind and host, whatever their bytes: on the
    RTX 2080 Ti every BatchNorm2d under ~12 us of bytes takes 155-160 us, conv 110 us, Linear 73-76 us,
    ReLU 23 us; on the A30 (another host) 57, 44, 27 and 7.6 us. Such a time bounds the kernel from
    above and measures the host; the trees, which answer in device time (`wall_clock` = 0 for every
    transferred answer; kinds only the thesis measured, BatchNorm and pooling, have no device-time rows at
    all), learnt the plateau as GPU physics: with the A30 held out they gave its small BatchNorm calls
    135-157 us (the RTX host's plateau) and resnet18 at 32x32 +145 %. The composition's host floor
    (model/crossdevice/xdevice_net.py) charges the host's share on the network instead. Rows above factor x h are
    kept: there the kernel dominates the loop."""
    out = np.zeros(len(rows), bool)
    wall = rows["wall_clock"].to_numpy(float) > 0
    if not wall.any():
        return out
    t = rows["t_s"].to_numpy(float)
    key = rows["device_config"].astype(str).to_numpy() + "|" + rows["xkind"].astype(str).to_numpy()
    for k in np.unique(key[wall]):
        sel = wall & (key == k)
        if sel.sum() >= HOST_PLATEAU_ROWS:
            out[sel] = t[sel] <= factor * floors.device_floor(t[sel])
    return out


def fit(rows: pd.DataFrame, p: XdeviceParams) -> OpModel:
    """The op model on `rows` (every GPU in them), their host-bound rows left out (`host_bound`)."""
    rows = rows[~host_bound(rows, p.host_plateau_factor)].reset_index(drop=True)
    X, off = design(rows, p.floor_s)
    y = np.log(rows["t_s"].to_numpy(float)) - off
    ens = fit_trees(X, y, p, weights(rows))
    return OpModel(
        ens, p.floor_s, tuple(sorted({gpu_of(c) for c in rows["device_config"].unique()})), rows_by_gpu(rows)
    )


def rows_by_gpu(rows: pd.DataFrame) -> dict[str, dict[str, int]]:
    """GPU -> {row source: count} of the rows a model is fitted on (`OpModel.trained_rows`)."""
    src = rows["source"].astype(str) if "source" in rows else pd.Series("unknown", index=rows.index)
    counts = pd.DataFrame({"gpu": rows["device_config"].map(gpu_of), "source": src}).value_counts()
    out: dict[str, dict[str, int]] = {}
    for (g, s), n in sorted(counts.items()):
        out.setdefault(str(g), {})[str(s)] = int(n)
    return out


def leave_one_gpu_out(
    rows: pd.DataFrame,
    p: XdeviceParams,
    fit_fn: FitFn = fit,
    gpus: Sequence[str] | None = None,
    on_fold: Callable[[str, "OpModel"], None] | None = None,
) -> pd.DataFrame:
    """Every row of each GPU predicted by a model fitted on the other GPUs' rows only; `on_fold(gpu,
    model)` sees each fold's model (the network validation reuses it)."""
    gpu = rows["device_config"].map(gpu_of)
    out = []
    for g in gpus or sorted(gpu.unique()):
        held = gpu == g
        model = fit_fn(rows[~held].reset_index(drop=True), p)
        if g in model.trained_on:
            raise AssertionError(f"leave-one-GPU-out: the model for {g} was fitted on {g}'s rows")
        if on_fold is not None:
            on_fold(g, model)
        test = rows[held].copy()
        test["gpu"] = g
        test["predicted_s"] = model.predict(test.reset_index(drop=True))
        out.append(test)
    return pd.concat(out, ignore_index=True)


def scores(measured: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """MAPE, median APE and time-weighted error in %, R² on log time, n."""
    y, p = np.asarray(measured, float), np.asarray(predicted, float)
    ape = np.abs(p - y) / y
    ly, lp = np.log(y), np.log(p)
    ss = float(((ly - ly.mean()) ** 2).sum())
    return {
        "n": int(len(y)),
        "mape": float(100 * ape.mean()),
        "mdape": float(100 * np.median(ape)),
        "twe": float(100 * np.abs(p - y).sum() / y.sum()),
        "r2_log": float(1 - ((ly - lp) ** 2).sum() / ss) if ss > 0 else float("nan"),
    }


def logo_table(pred: pd.DataFrame) -> pd.DataFrame:
    """Per held-out GPU and report group, and pooled per group ('all' GPUs): the four scores, the
    NeuSight anchor and the goal."""
    pred = pred.assign(group=pred["xkind"].map(REPORT_GROUP))
    rows = []
    for (g, grp), d in pred.groupby(["gpu", "group"]):
        rows.append({"gpu": g, "group": grp, **scores(d["t_s"], d["predicted_s"])})
    for grp, d in pred.groupby("group"):
        # pooled: each GPU's rows equally weighted (mean of the per-GPU MAPEs), and the plain pool
        per = [scores(x["t_s"], x["predicted_s"])["mape"] for _, x in d.groupby("gpu")]
        pooled = scores(d["t_s"], d["predicted_s"])
        rows.append({"gpu": "all", "group": grp, **pooled, "mape_gpu_mean": float(np.mean(per))})
    df = pd.DataFrame(rows)
    df["neusight_ood_mape"] = df["group"].map(NEUSIGHT_OOD_MAPE)
    df["goal_mape"] = df["group"].map(GOAL_MAPE).fillna(GOAL_OTHER)
    return df


# -- persistence ---------------------------------------------------------------------------------
@dataclass
class XdeviceModel:
    """What `models/xdevice/` holds: the op model, the composition that transfers, the interval law."""

    op: OpModel
    composition: Mapping[str, Any] = field(
        default_factory=dict
    )  # model/crossdevice/xdevice_net.py: floor, bw ratios, ...
    interval: dict[str, Any] = field(default_factory=dict)  # q90 of |log error| = a + b * distance
    scores: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "columns": list(COLUMNS),
            "floor_s": self.op.floor_s,
            "trained_on": list(self.op.trained_on),
            "trained_rows": self.op.trained_rows,
            "ensemble": {
                "depth": self.op.ensemble.depth,
                "strict_less": self.op.ensemble.strict_less,
                "base": self.op.ensemble.base,
                "average": self.op.ensemble.average,
            },  # fmt: skip
            "composition": self.composition,
            "interval": self.interval,
            "scores": self.scores,
            "content_hash": self.content_hash,
        }

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        e = self.op.ensemble
        write_npz({k: getattr(e, k).astype(t) for k, t in _ARRAYS.items()}, folder / TREES_FILE)
        write_json(self.to_json(), folder / MODEL_FILE, digits=None)

    @classmethod
    def load(cls, folder: Path) -> "XdeviceModel":
        """Read as data only (JSON and npz without pickle); a mismatch is one clear line."""
        folder = Path(folder)
        f = folder / MODEL_FILE
        d = read_json_model(f, "cross-device model", "train-xdevice")
        if d.get("format") != FORMAT or d.get("columns") != list(COLUMNS):
            raise OpcostError(f"{f}: format {d.get('format')!r} or feature columns differ from this opcost's {FORMAT}")
        arr = read_npz(folder / TREES_FILE)
        ens = TreeEnsemble(**{k: np.asarray(arr[k], t) for k, t in _ARRAYS.items()}, **d["ensemble"])  # type: ignore[arg-type]
        rows = {str(g): {str(k): int(v) for k, v in c.items()} for g, c in d.get("trained_rows", {}).items()}
        op = OpModel(ens, float(d["floor_s"]), tuple(d["trained_on"]), rows)
        return cls(op, d["composition"], d["interval"], d["scores"], d.get("content_hash", ""))
