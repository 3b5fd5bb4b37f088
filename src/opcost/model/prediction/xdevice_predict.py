"""Transferred answers: a network on a table GPU that has no bundle of its own, from the cross-device model.

`Predictor` (model/prediction/predict.py) asks `own_config`, then `transfer_config`, whether a request goes here: the
device (a table key or NVML name, optionally `_no_tf32`) resolves to a table GPU, and no bundle
`models/<config>-<mode>/` exists for it (a GPU with its own measurements keeps its own models). The answer says
`transferred` for every op, the numerics it assumes (PyTorch's fp32 defaults, or TF32 off), a multiplicative 90 %
interval from the leave-one-GPU-out network errors at this GPU's distance from the training GPUs, and the memory
footprint from the extraction (ops/memory.py). Energy comes from the power model of model/clocks/xpower.py where it
exists; otherwise it is left out (None) and the note says why: this module invents no power model.

Measured ops. Where our campaigns measured ops on the GPU (model/crossdevice/measured.py, models/measured/ops.json),
those ops show their measured time per call (source `measured`) and the rest stay transferred. The
network's step runs through the host/GPU queue (model/crossdevice/hostqueue.py) as every transferred answer's does,
t_net = scale x queue time (+ the optimizer step): a transferred op's kernel is the cross-device model's
(and its backward in training), a measured op's kernel is its measured GPU time where its campaign timed
the GPU apart (measure/gputime.py; forward+backward in training), else its measured wall time; every call
is issued at the answer's host cost. Energy stays transferred.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from opcost import devices
from opcost.devices import DeviceConfig, resolve_device_config, same_numerics, table_name
from opcost.errors import OpcostError
from opcost.model.composition.compose import Costs
from opcost.model.composition.costing import FITTED, MEASURED, TRANSFERRED
from opcost.model.crossdevice.hostqueue import step_queue
from opcost.model.prediction.answer import HostSplit
from opcost.paths import Paths

if TYPE_CHECKING:  # pandas and the cross-device model load only for a transferred answer (a fast cold start)
    from opcost.model.basis.features import OpRecord
    from opcost.model.crossdevice import xdevice
    from opcost.model.crossdevice.hosts import HostProfile
    from opcost.model.prediction.answer import FittedInfo, MeasuredNote, NetworkPrediction

_MODELS: dict[Path, xdevice.XdeviceModel] = {}
SOURCE = TRANSFERRED  # an answer of the cross-device model (costing.py: the labels' home)
FITTED_CONSTANT = "fitted-constant"  # the host of a cross-device model trained before host profiles existed
NUMERICS = {
    True: "fp32 with PyTorch's defaults (cuDNN convolutions may use TF32 where the GPU has it; matmuls do not)",
    False: "fp32 with TF32 off (_no_tf32)",
}


@dataclass(frozen=True)
class TransferredOps:
    """A network's transferred costs (`predict_network`), before they become a NetworkPrediction: per op (in `ids`
    order) its record, calls, time per call as the answer shows it (`t_s`), its source and the factor one call's
    shown time carries into the op sum (the network scale for a measured op, else 1); the network's time and its
    90 % interval, the optimizer step inside it, the op sum; what the interval was read at (distance to the
    training GPUs, share of kernel time outside matrix products); the numerics, the in-sample `fitted` info, the
    few-shot kind factors and how many measured ops gave them, the network scale and the host's split. Frozen:
    `at_clock` returns a moved copy."""

    ids: list[str]
    records: list[OpRecord]
    calls: np.ndarray
    t_s: np.ndarray
    time_s: float
    interval: tuple[float, float]
    distance: float
    other_share: float
    tf32: bool
    optimizer_s: float
    sum_s: float
    sources: list[str]
    fitted: FittedInfo | None
    factors: dict[str, float]
    factor_ops: int
    factor: np.ndarray
    scale: float
    host: HostSplit


@dataclass(frozen=True)
class TransferredEnergy:
    """A transferred answer's energy (`energy`): energy per step, the average power and the energy's 90 % interval."""

    energy_j: float
    power_w: float
    interval: tuple[float, float]


def load(folder: Path) -> xdevice.XdeviceModel:
    from opcost.model.crossdevice import xdevice

    folder = Path(folder)
    if folder not in _MODELS:
        _MODELS[folder] = xdevice.XdeviceModel.load(folder)
    return _MODELS[folder]


def own_candidates(device: str) -> list[str]:
    """The device configs whose own bundle would answer `device`: as given, its table key (an NVML name),
    and the config of the same numerics (`RTX2080Ti` for `RTX2080Ti_no_tf32`)."""
    return list(dict.fromkeys((device, table_name(device), same_numerics(device))))


def own_config(device: str, mode: str, own_targets: list[str]) -> str | None:
    """The device config of `device`'s own bundle in `mode` (its table key where an NVML name was given),
    None where it has none. Light: it needs neither pandas nor the cross-device model."""
    for cfg in own_candidates(device):
        if f"{cfg}-{mode}" in own_targets:
            return cfg
    return None


def transfer_config(device: str, mode: str, own_targets: list[str]) -> tuple[str, DeviceConfig | None]:
    """(device config, None) when `device` has its own bundle in `mode` (its table key if an NVML name
    was given); (device config, its resolved DeviceConfig) for a table GPU without one: the name is resolved
    here, once per request, and the answer path takes the DeviceConfig. Unknown names: one line."""
    mine = own_config(device, mode, own_targets)
    if mine is not None:
        return mine, None
    found = devices.device_config(device)
    if f"{found.name}-{mode}" in own_targets:
        return found.name, None
    return found.name, found


def host_profile(folder: Path, comp: Mapping[str, Any], name: str | None) -> HostProfile:
    """The host a transferred answer assumes (model/crossdevice/hosts.py): `name` among the profiles the cross-device
    model learnt, else a profile `opcost calibrate-host` saved under hosts/; None: the reference host. A model
    trained before host profiles existed answers with its fitted per-call constant."""
    from opcost.model.crossdevice import hosts, xdevice_net

    known = xdevice_net.profiles(comp)
    if name is None:
        name = hosts.REFERENCE_HOST if hosts.REFERENCE_HOST in known else None
        if name is None:
            return hosts.uniform(FITTED_CONSTANT, float(comp["host_floor_s"]), "the composition's per-call constant")
    if name in known:
        return known[name]
    user = Paths(Path(folder).parent.parent).host_file(hosts.check_name(name))
    if user.is_file():
        return hosts.load(user)
    raise OpcostError(
        f"--host {name!r}: no such host profile; known: {', '.join(sorted(known)) or 'none'}, or measure this "
        f"machine with `opcost calibrate-host --name {name}` (writes {user})"
    )


def predict_network(folder: Path, net: Any, found: DeviceConfig, mode: str, optimizer: str = "sgd",
                    host: str | None = None) -> TransferredOps:  # fmt: skip
    """Per-op transferred costs and the composed network time with its interval, for `net` (a
    predict.Network) on the device config `found`, its step run through the host/GPU queue
    (model/crossdevice/hostqueue.py) with the host `host` (host_profile)."""
    import pandas as pd

    from opcost.model.crossdevice import fewshot, xdevice, xdevice_net, xinterval

    model = load(folder)
    dev, tf32 = found
    device_config = found.name  # the key of the data: the rows' column, models/measured
    ids = list(net.records)
    recs = [net.records[i] for i in ids]
    calls = np.array([float(net.calls[i]) for i in ids])
    views = np.array([bool(r.metrics.get("is_view")) for r in recs])
    # one cross-device row per op, or per kernel where it is costed from its parts (xdevice_net.op_rows)
    expanded = [(i, row, count) for i, r in enumerate(recs) for row, count in xdevice_net.op_rows(r)]
    rows = pd.DataFrame([row for _, row, _ in expanded])
    rows["device_config"] = device_config
    rows["wall_clock"] = 0.0
    t_fw = model.op.predict(rows, found) if len(rows) else np.zeros(0)
    # the GPU's measured ops correct the transfer of the others per kind (model/crossdevice/fewshot.py; forward times)
    pairs = measured_rows(Path(folder), device_config)
    factors = fewshot.device_factors(model.op, pairs, found)
    if factors and len(rows):
        t_fw = fewshot.apply_factors(rows["xkind"], t_fw, factors)
    comp = model.composition
    scale = float(comp["scale"])
    owner = np.array([i for i, _, _ in expanded], int)
    count = np.array([c for _, _, c in expanded], float)
    xk = rows["xkind"].to_numpy() if len(rows) else np.zeros(0, str)
    prof = host_profile(Path(folder), comp, host)
    # a profile measured isolated calls: in a network a call costs `in_network` x that (xdevice_net.IN_NETWORK_GRID)
    host_row = prof.costs(list(xk)) * (1.0 if prof.name == FITTED_CONSTANT else float(comp.get("in_network", 1.0)))
    view_row = views[owner] if len(owner) else np.zeros(0, bool)
    t_fw[view_row], host_row[view_row] = 0.0, 0.0  # a view launches no kernel (and the validation has none)
    ratio_row = (
        np.array([xdevice_net.bw_ratio(comp.get("bw_ratio", {}), x) for x in xk]) if mode == "training" else None
    )
    params = float(sum(float(r.metrics.get("params", 0)) * c for r, c in zip(recs, calls)))
    opt = xdevice_net.optimizer_s(mode, params, found)
    own = measured_times(Path(folder), device_config, mode)
    own_gpu = measured_gpu_times(Path(folder), device_config, mode)
    hit = np.array([i in own for i in ids], bool)
    if hit.any():  # a measured op on its first row: its measured GPU time per call where its campaign timed the
        # GPU apart (forward+backward in training), else its measured wall time; issued at the answer's host cost
        first = np.r_[True, owner[1:] != owner[:-1]] if len(owner) else np.zeros(0, bool)
        for j in np.flatnonzero(hit[owner]):
            op = ids[owner[j]]
            t_fw[j] = own_gpu.get(op, own[op]) if first[j] else 0.0
            if ratio_row is not None:
                ratio_row[j] = 0.0
    queue = step_queue(t_fw, calls[owner] * count, host_row, ratio_row, float(comp.get("bw_host_factor", 1.0)))
    time_s = scale * queue.time_s + opt
    # per op, as the answer lists it: its kernel(s) or its host cost, whichever is longer, times the scale (the
    # network's time is the queue's, in which the host runs ahead of long kernels: not the sum of these)
    shown = xdevice_net.op_time(t_fw, xk, mode, comp, host_row) if len(rows) else np.zeros(0)
    per_call = np.bincount(owner, weights=shown * count, minlength=len(recs)) * scale
    per_call[views] = 0.0
    # per op: what one call adds per second shown; a measured op shows its measured time, the scale apart
    factor = np.ones(len(ids))
    factor[hit] = scale
    per_call[hit] = [own[i] for i in np.asarray(ids, dtype=object)[hit]]
    trained = model.op.trained_devices
    in_sample = dev.name in model.op.trained_on  # its own measured ops are in the training set: FITTED
    dist = xdevice.distance(dev, trained) if not in_sample else 0.0
    share = xinterval.other_share(xk, t_fw, calls[owner] * count) if len(rows) else 1.0
    hw = xinterval.halfwidth(model.interval, dist, share)
    return TransferredOps(
        ids=ids,
        records=recs,
        calls=calls,
        t_s=per_call,
        time_s=time_s,
        interval=(time_s * math.exp(-hw), time_s * math.exp(hw)),
        distance=dist,
        other_share=share,
        tf32=tf32,
        optimizer_s=opt,
        sum_s=float((per_call * factor * calls).sum()),
        sources=[MEASURED if h else FITTED if in_sample else TRANSFERRED for h in hit],
        fitted=fitted_info(model.op, dev.name) if in_sample else None,
        factors=factors,
        factor_ops=len(pairs),
        factor=factor,
        scale=scale,
        host=HostSplit(
            name=prof.name,
            source=prof.source,
            host_bound_share=queue.host_bound_share,
            host_s=scale * queue.host_s,
            gpu_s=scale * queue.gpu_s,
            queue_s=scale * queue.time_s,
        ),
    )


def fitted_info(op: Any, gpu: str) -> FittedInfo:
    """What the cross-device model saw of `gpu`'s own ops (xdevice.OpModel.trained_rows): the answer's `fitted`
    (JSON) and its note; `ops` None for a model saved before it counted them."""
    from opcost.model.crossdevice.xdevice import ROW_SOURCES

    rows = op.trained_rows.get(gpu, {})
    return {
        "gpu": gpu,
        "ops": int(sum(rows.values())) if rows else None,
        "measured_by": [ROW_SOURCES.get(k, k) for k in sorted(rows)],
    }


def fitted_ops_text(info: FittedInfo) -> str:
    """`fitted_info`'s ops in words: '39 266 ops measured on this GPU by NeuSight'."""
    n = f"{info['ops']:,}".replace(",", " ") + " ops" if info["ops"] else "ops"
    by = f" by {' and '.join(info['measured_by'])}" if info["measured_by"] else ""
    return f"{n} measured on this GPU{by}"


def fitted_text(info: FittedInfo) -> str:
    """`fitted_info` in words: 'the cross-device model was trained on 39 266 ops measured on this GPU by NeuSight'."""
    return f"the cross-device model was trained on {fitted_ops_text(info)}"


def measured_times(folder: Path, device_config: str, mode: str) -> dict[str, float]:
    """op_id -> time per call that our campaigns measured on `device_config` in `mode` (model/crossdevice/measured.py),
    from models/measured/ beside the cross-device model's folder; empty where there is none."""
    from opcost.model.crossdevice import measured

    return measured.op_times(Paths(Path(folder).parent.parent).measured_ops_dir, device_config, mode)


def measured_rows(folder: Path, device_config: str) -> list[tuple[dict[str, Any], float]]:
    """(cross-device row, GPU time per call) of the inference ops measured on `device_config`
    (model/crossdevice/measured.op_rows_measured): the few-shot correction's input."""
    from opcost.model.crossdevice import measured

    return measured.op_rows_measured(Paths(Path(folder).parent.parent).measured_ops_dir, device_config)


def measured_gpu_times(folder: Path, device_config: str, mode: str) -> dict[str, float]:
    """op_id -> GPU time per call our campaigns measured on `device_config` in `mode`
    (model/crossdevice/measured.py)."""
    from opcost.model.crossdevice import measured

    return measured.op_gpu_times(Paths(Path(folder).parent.parent).measured_ops_dir, device_config, mode)


def measured_note(folder: Path, r: TransferredOps, device_config: str) -> MeasuredNote | None:
    """What of the answer `r` was measured on `device_config`: the campaigns, op counts, shares of calls and of
    the op time the answer shows (as its coverage counts them), the composition used and that energy is
    transferred; None where nothing was."""
    from opcost.model.crossdevice import measured

    hit = np.array([s == MEASURED for s in r.sources], bool)
    if not hit.any():
        return None
    entry = measured.device_entry(Paths(Path(folder).parent.parent).measured_ops_dir, device_config) or {}
    calls = np.asarray(r.calls, float)
    time = np.asarray(r.t_s, float) * calls  # the op times as the answer shows them (its coverage's shares)
    return {
        "device_config": device_config,
        "campaigns": list(entry.get("campaigns", [])),
        "ops": int(hit.sum()),
        "ops_total": int(len(hit)),
        "calls_share": float(calls[hit].sum() / (calls.sum() or 1.0)),
        "time_share": float(time[hit].sum() / (time.sum() or 1.0)),
        "composition": f"scale {r.scale:.4g} x (measured times + transferred times before scale) x calls"
        + (" + the optimizer step" if r.optimizer_s else ""),
        "energy": "transferred: the cross-device power model; energy measured in these campaigns is not used",
    }


def factors_note(factors: dict[str, float], n_ops: int, device_config: str) -> str:
    """What the few-shot correction (model/crossdevice/fewshot.py) did to an answer's transferred ops."""
    from opcost.model.crossdevice import fewshot  # pandas: only where a transferred answer is built

    kinds = ", ".join(f"{k} x{v:.2f}" for k, v in sorted(factors.items()) if k != fewshot.POOLED)
    return (
        f"corrected: {n_ops} ops measured on {device_config} (their GPU times) against the transfer set a factor per "
        f"op kind ({kinds}; other kinds x{factors[fewshot.POOLED]:.2f}), each shrunk towards no correction by "
        f"{fewshot.SHRINK_OPS:g} pseudo-ops; every transferred op of this answer carries its kind's"
    )


def busy_share(r: TransferredOps, found: DeviceConfig, work: float = 1.0) -> float:
    """The network's roofline time over its predicted time (what the power model's busy share means), its ops'
    forward roofline times x `work` (xpower.work_factor: a training step's backward counted as the power model's
    rows count it)."""
    from opcost.model.basis.physics import roofline_s

    roof = work * sum(roofline_s(x.kind, x.metrics, found) * c for x, c in zip(r.records, r.calls))
    return float(roof / r.time_s) if r.time_s > 0 else 0.0


def energy(root: Path, r: TransferredOps, found: DeviceConfig, mode: str) -> tuple[TransferredEnergy | None, str]:
    """Energy from the cross-device power model (model/clocks/xpower.py, models/xpower/) where both exist:
    (energy, its interval, power) and a note; else None and why."""
    from opcost.model.clocks import xpower

    folder = Path(root) / "models" / "xpower"
    if not folder.is_dir():
        return None, "energy: models/xpower not found (`dvc pull` or its stage), so energy is left out"
    pm = xpower.PowerModel.load(folder)
    dev = found.device
    u = busy_share(r, found, xpower.work_factor(mode))
    p, rel = pm.predict(dev.name, np.array([u]), None, mode)
    e = float(p[0]) * r.time_s
    lo, hi = r.interval
    lv = pm.levels.get(dev.name)
    level = (
        ""
        if lv is None
        else f"min(TDP, {lv['factor']:.2f}, the power level {lv['networks']:.0f} networks measured on this GPU show "
        "against the model (model/clocks/xpower.device_levels), x "
    )
    w = xpower.work_factor(mode)
    work = f" (its forward ops' x {w:g}: a training step's backward as the power model's rows count it)" * (w != 1)
    basis = (
        f"energy: transferred time x power from the cross-device power model (models/xpower): {float(p[0]):.0f} W = "
        f"{level}TDP {dev.tdp_w:.0f} W x (idle {pm.idle:.2f} + (1 - idle) x dynamic share {float(pm.level(u)):.2f} at "
        f"busy share {u:.2f}, the network's roofline time{work} over its predicted time){')' if lv else ''}, fitted on "
        f"{len(pm.trained_on)} GPUs ({', '.join(pm.trained_on) or 'none named'}); its 90 % error leaving one GPU out "
        f"is {100 * rel:.0f} %"
    )
    interval = (lo * float(p[0]) * max(1 - rel, 0.0), hi * float(p[0]) * (1 + rel))
    return TransferredEnergy(energy_j=e, power_w=float(p[0]), interval=interval), basis


def at_clock(
    r: TransferredOps, en: TransferredEnergy | None, found: DeviceConfig, clock: float, clock_model: Any
) -> tuple[TransferredOps, TransferredEnergy | None, str]:
    """The transferred answer `r` (and its energy `en`), both at the boost clock, moved to core clock
    `clock` by the cross-clock model (model/clocks/clock.py), as model/prediction/clocktransfer.py does for own bundles
    without a measured sweep: each op's compute-bound share from its roofline split, the optimizer step
    bytes-bound (share 0), the network's transferred power as every op's reference power. The intervals
    widen by the clock model's leave-one-GPU-out error at this distance from the boost clock. `r` and `en` stay as
    they were: the moved answer and energy are new values."""
    from opcost.model.clocks.clock import check_clock, time_ratio
    from opcost.model.prediction.clocktransfer import roofline_shares, transfer_note, widen

    dev = found.device
    check_clock(dev, clock)
    share = np.append(roofline_shares(r.records, found), 0.0)  # the optimizer step: memory-bound
    t_ref = np.append(np.asarray(r.t_s, float), r.optimizer_s)
    weights = np.append(np.asarray(r.calls, float) * np.asarray(r.factor, float), 1.0)
    if en is not None:
        p_ref = np.full(len(t_ref), float(en.power_w))
        t, p = clock_model.at_clock(dev, clock, t_ref, p_ref, share)
    else:  # no power to place the board's cap with: time alone, by the same law
        t, p = t_ref * time_ratio(clock, dev.boost_clock_mhz, share), None
    ref_sum = float((t_ref * weights).sum())
    k = float((t * weights).sum()) / ref_sum if ref_sum > 0 else 1.0  # the queue's step moves as its ops do
    time_s = k * r.time_s
    et, ee = clock_model.error_at(clock / dev.boost_clock_mhz)
    lo, hi = r.interval
    out = dataclasses.replace(r, t_s=t[:-1], optimizer_s=float(t[-1]), sum_s=float((t[:-1] * weights[:-1]).sum()),
                              time_s=time_s, interval=widen((k * lo, k * hi), et))  # fmt: skip
    en_out = None
    if en is not None and p is not None:
        e = time_s * float((t * p * weights).sum()) / max(float((t * weights).sum()), 1e-30)  # mean power x time
        ke = e / (float(en.energy_j) or 1.0)
        elo, ehi = en.interval
        en_out = TransferredEnergy(energy_j=e, power_w=e / time_s if time_s > 0 else float("nan"),
                                   interval=widen((ke * elo, ke * ehi), ee))  # fmt: skip
    note = f"clock {clock:g} MHz (boost {dev.boost_clock_mhz:g}): " + transfer_note(et, ee, found.name)
    return out, en_out, note


def network_prediction(
    folder: Path,
    spec: Any,
    net: Any,
    found: DeviceConfig,
    mode: str,
    optimizer: str,
    clock: float | None = None,
    clock_model: Any = None,
    host: str | None = None,
) -> NetworkPrediction:
    """A predict.NetworkPrediction whose every op is `transferred`, on the device config `found`; at `clock`
    (MHz, within the table's range) through `clock_model` (model/clocks/clock.ClockModel), else at the default
    (boost) clock; driven by the host `host` (host_profile; None: the reference host)."""
    from opcost.model.prediction.answer import TRAINING_NOTE, NetworkPrediction, network_fields

    device_config = found.name
    r = predict_network(folder, net, found, mode, optimizer, host)
    en, en_note = energy(Path(folder).parent.parent, r, found, mode)
    clock_note = None
    if clock is not None:
        r, en, clock_note = at_clock(r, en, found, float(clock), clock_model)
    n = len(r.ids)
    own = measured_note(folder, r, device_config)
    costs = Costs(r.t_s, np.full(n, np.nan), list(r.sources), [None] * n)
    trained_on = load(folder).op.trained_on
    trained = ", ".join(trained_on)
    if own is None and r.fitted is not None:
        head = (
            f"fitted: {device_config} has no bundle of its own, but {fitted_text(r.fitted)}: its op times are that "
            f"model's in-sample fit, not a transfer to a GPU it never saw (models/xdevice, trained on {trained}), "
            f"numerics {NUMERICS[r.tf32]}; "
        )
    elif own is None:
        head = (
            f"transferred: {device_config} has no measurements of its own; op times from the cross-device model "
            f"(models/xdevice, trained on {trained}), numerics {NUMERICS[r.tf32]}; "
            if not r.factors
            else f"transferred: no op of this network was measured on {device_config}; op times from the "
            f"cross-device model (models/xdevice, trained on {trained}), numerics {NUMERICS[r.tf32]}; "
        )
    else:
        head = (
            f"measured: {own['ops']} of {own['ops_total']} ops were measured on {device_config} (campaign "
            f"{', '.join(own['campaigns'])}; {100 * own['calls_share']:.0f} % of calls, "
            f"{100 * own['time_share']:.0f} % of the op time) and take their measured time per call (their "
            f"measured GPU time in the step's host/GPU queue where the campaign timed it); "
            + (
                f"the other {own['ops_total'] - own['ops']} are transferred from the cross-device model "
                f"(models/xdevice, trained on {trained}), numerics {NUMERICS[r.tf32]}; "
                if own["ops"] < own["ops_total"]
                else ""
            )
            + f"the network composes them as transferred answers do (scale {r.scale:.3g} x the step's host/GPU "
            "queue); "
        )
    notes = [
        head + f"the 90 % interval comes from leave-one-GPU-out network errors at this GPU's distance "
        f"{r.distance:.2f} from the training GPUs and this network's {100 * r.other_share:.0f} % of kernel "
        "time outside matrix products (model/crossdevice/xinterval.py)",
        en_note if own is None else en_note + " (energy measured on this GPU is not used: time only)",
    ]
    if r.factors:
        notes.insert(1, factors_note(r.factors, r.factor_ops, device_config))
    hs = r.host
    notes.append(
        f"host: {hs.name}{' (the reference host; --host NAME for another)' if host is None else ''}, "
        f"{hs.source}; the step runs through a host/GPU queue and the GPU waits on the host "
        f"{100 * hs.host_bound_share:.0f} % of it"
    )
    if clock_note is not None:
        notes.append(clock_note)
    n_gpus = len(trained_on)
    if own is None and r.fitted is not None:
        summary = (
            f"{device_config} has no bundle of its own: times from the cross-device model, which was fitted on "
            f"{fitted_ops_text(r.fitted)} (an in-sample fit) and on {n_gpus - 1} other "
            f"GPU{'s' if n_gpus != 2 else ''}"
        )
    elif own is None:
        summary = (
            f"{device_config} has no measurements of its own: times from the cross-device model ({n_gpus} other "
            "GPUs" + (", corrected by ops measured on it)" if r.factors else ")")
        )
    else:
        summary = (
            f"{own['ops']} of {own['ops_total']} ops measured on {device_config}; the rest and the network's "
            "composition from the cross-device model"
        )
    summary += ", energy from the cross-device power model" if en is not None else "; no energy (no power model)"
    if clock is not None:
        summary += f"; at {float(clock):g} MHz through the cross-clock model"
    if mode == "training":
        notes.insert(1, TRAINING_NOTE.replace("the composition layer's parameter term", "a bytes-bound SGD step"))
    notes.extend(net.notes)
    return NetworkPrediction(
        **network_fields(spec, net, mode, optimizer),
        device_config=device_config,
        device=found,
        mode=mode,
        clock_mhz=None if clock is None else float(clock),
        time_s=r.time_s,
        time_interval_s=r.interval,
        energy_j=None if en is None else en.energy_j,
        energy_interval_j=None if en is None else en.interval,
        avg_power_w=None if en is None else en.power_w,
        sum_s=r.sum_s,
        op_ids=r.ids,
        kinds=[x.kind for x in r.records],
        calls=r.calls,
        t_s=costs.t_s,
        e_j=None,
        sources=costs.source,
        proxies=costs.proxy,
        calibrated=False,
        composition="cross-device",
        note="; ".join(notes),
        summary=summary,
        warnings=[],
        clock_source=None if clock is None else SOURCE,
        measured=own,
        fitted=r.fitted,
        host=dataclasses.replace(hs, reference=host is None),
    )


def table_configs(names: str) -> list[str]:
    """`--devices H100,A100,L4,T4` as device configs (table keys, `_no_tf32` kept); unknown: one line."""

    items = [n.strip() for n in names.split(",")]
    if "" in items:  # "H100,,L4" or a trailing comma: a GPU left out, never skipped unsaid
        raise OpcostError(
            f"--devices {names!r}: entry {items.index('') + 1} is empty; expected a comma-separated list of GPUs, "
            "e.g. H100,A100,L4,T4"
        )
    out = [resolve_device_config(n) for n in items]
    return list(dict.fromkeys(out))


__all__ = [
    "HostSplit",
    "TransferredEnergy",
    "TransferredOps",
    "network_prediction",
    "predict_network",
    "table_configs",
    "transfer_config",
]
