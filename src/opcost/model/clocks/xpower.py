"""The cross-device power model: average power of an op (network, kernel, stage) on any GPU of the table.

Why: energy = power x time, and no GPU beyond the thesis A30 and RTX 2080 Ti has per-op power here. Average
power is learned from every device with power data as a function of the board's TDP, its idle (static) power,
the core clock and how busy the op keeps the device, so that it transfers to GPUs never measured. Static and
idle power live here, where the clock acts on them. Five global parameters:

    P(u, f) = TDP * [ idle + (1 - idle) * clip(a + b * u^c, 0, 1) * (f / f_boost)^gamma ],  capped at `cap`

u in [0, 1] is the *busy share* (roofline time over time; DCGM activity or the transformer layer's FLOPs where
those stand for it); cap the power limit where one is set, else the TDP. Fitted by least squares on relative
power errors, each GPU and each source within it weighing the same, on absolute rows (power from (device, u, f)
alone, as a transferred prediction asks) and sweep curves (each predicted from its own reference point).

    model = PowerModel.load(folder)                      # models/xpower/ (JSON, never pickle)
    power_w, rel_err90 = model.predict("H100", busy_share, clock_mhz=None, mode="inference")

A training step's busy share counts its backward's work (`work_factor`), as the training rows did. `rel_err90`:
the 90th percentile of the leave-one-GPU-out relative power error; a 90 % interval is power x (1 +- rel_err90).
Each term's meaning, the fit's rows and the figures: docs/power.md, "Power on any GPU".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost.devices import Device, table_device, unknown_device
from opcost.errors import OpcostError
from opcost.io import read_json_model, write_json
from opcost.model.basis.arrays import Floats

XPOWER_MODEL_FILE = "xpower_model.json"
FORMAT = 1
MODES = ("inference", "training")
PARAMS = ("idle", "a", "b", "c", "gamma")
TRAINING_WORK = 3.0  # a training step's FLOPs and bytes over its forward's: backward = 2x forward (an assumption)
ROW_COLUMNS = ["kind", "source", "device", "workload", "curve", "u", "f", "cap", "p", "t", "tdp", "f_boost"]


def work_factor(mode: str) -> float:
    """A step's roofline work over its forward ops' (TRAINING_WORK in training, 1 in inference): how every busy
    share, the power model's rows and a prediction's alike, counts a training step."""
    return TRAINING_WORK if mode == "training" else 1.0


@dataclass
class PowerModel:
    """The fitted global parameters (module docstring) and their leave-one-GPU-out error."""

    idle: float = 0.25
    a: float = 0.3
    b: float = 0.6
    c: float = 1.0
    gamma: float = 2.0
    trained_on: list[str] = field(default_factory=list)
    n_rows: int = 0
    rel_err90: float = 0.0  # leave-one-GPU-out |P_hat / P - 1|, 90th percentile, absolute rows
    logo_error: dict[str, float] = field(default_factory=dict)  # pooled MAPE (fractions): power, energy
    # device -> {"factor", "networks"}: the power level our measured networks show on that GPU (`device_levels`)
    levels: dict[str, dict[str, float]] = field(default_factory=dict)

    # -- the form ----------------------------------------------------------------------------
    def level(self, u: Floats) -> npt.NDArray[np.float64]:
        """The dynamic part's share of the TDP headroom at the boost clock: clip(a + b u^c, 0, 1)."""
        return np.clip(self.a + self.b * np.clip(np.asarray(u, np.float64), 0.0, 1.0) ** self.c, 0.0, 1.0)

    def power_from_level(
        self,
        d: Floats,
        x: Floats,
        tdp: Floats,
        cap: Floats,
    ) -> npt.NDArray[np.float64]:
        """TDP (idle + (1 - idle) d x^gamma), at most `cap` (NaN cap: the TDP)."""
        tdp = np.asarray(tdp, np.float64)
        cap = np.where(np.isnan(np.asarray(cap, np.float64)), tdp, cap)
        p = tdp * (self.idle + (1 - self.idle) * np.asarray(d, np.float64) * np.asarray(x, np.float64) ** self.gamma)
        return np.minimum(p, cap)

    def level_from_power(
        self,
        p: Floats,
        x: Floats,
        tdp: Floats,
    ) -> npt.NDArray[np.float64]:
        """The level d a measured power implies at clock ratio x (the inverse of the uncapped form)."""
        p, tdp = np.asarray(p, np.float64), np.asarray(tdp, np.float64)
        return np.maximum(p / tdp - self.idle, 0.0) / ((1 - self.idle) * np.asarray(x, np.float64) ** self.gamma)

    def power(
        self,
        u: Floats,
        x: Floats,
        tdp: Floats,
        cap: Floats,
    ) -> npt.NDArray[np.float64]:
        return self.power_from_level(self.level(u), x, tdp, cap)

    def predict(
        self,
        device_key: str,
        busy_share: npt.NDArray[np.float64],
        clock_mhz: float | None = None,
        mode: str = "inference",
    ) -> tuple[npt.NDArray[np.float64], float]:
        """(average power in W per entry of `busy_share`, relative 90 % half-width) on `device_key`."""
        dev = table_device(device_key)
        if dev is None:
            raise unknown_device(device_key)
        if mode not in MODES:
            raise OpcostError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        u = np.asarray(busy_share, np.float64)
        if not np.all(np.isfinite(u)) or np.any(u < 0):
            raise OpcostError("busy_share must hold finite numbers >= 0 (roofline time over time)")
        if clock_mhz is None:
            x = 1.0
        else:
            lo, hi = dev.clock_range_mhz
            if not (math.isfinite(clock_mhz) and lo <= clock_mhz <= hi):
                raise OpcostError(f"clock {clock_mhz:g} MHz is outside the {dev.name}'s range {lo:g}-{hi:g} MHz")
            x = clock_mhz / dev.boost_clock_mhz
        level = float(self.levels.get(dev.name, {}).get("factor", 1.0))
        return np.minimum(self.power(u, x, dev.tdp_w, dev.tdp_w) * level, dev.tdp_w), self.rel_err90

    # -- storage (data only) -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, folder: Path) -> None:
        write_json(self.to_json(), Path(folder) / XPOWER_MODEL_FILE)

    @classmethod
    def from_json(cls, d: Any, where: str = "power model") -> "PowerModel":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise OpcostError(f"{where} is not a power model of format {FORMAT}; refused")
        try:
            m = cls(
                **{k: float(d[k]) for k in PARAMS},
                trained_on=[str(x) for x in d.get("trained_on", [])],
                n_rows=int(d.get("n_rows", 0)),
                rel_err90=float(d.get("rel_err90", 0.0)),
                logo_error={str(k): float(v) for k, v in d.get("logo_error", {}).items()},
                levels={
                    str(k): {"factor": float(v["factor"]), "networks": float(v["networks"])}
                    for k, v in d.get("levels", {}).items()
                },
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise OpcostError(f"{where} lacks a parameter or holds a non-number; refused") from None
        values = [getattr(m, k) for k in PARAMS] + [m.rel_err90, *m.logo_error.values()]
        factors = [v["factor"] for v in m.levels.values()]
        if not all(math.isfinite(v) for v in values + factors) or not 0 <= m.idle < 1 or m.gamma <= 0:
            raise OpcostError(f"{where}: parameters out of range (idle in [0, 1), gamma > 0); refused")
        if any(f <= 0 for f in factors):
            raise OpcostError(f"{where}: a device's power level factor is not positive; refused")
        return m

    @classmethod
    def load(cls, folder: Path) -> "PowerModel":
        f = Path(folder) / XPOWER_MODEL_FILE
        return cls.from_json(read_json_model(f, "power model", "train-clock"), str(f))


# -- rows -----------------------------------------------------------------------------------------
# Perseus stage profiles (bf16): transformer layers of GPT-3 175B (96 layers, hidden 12288) and BLOOM
# 176B (70 layers, hidden 14336), 8 pipeline stages. Assumed, as the artifact does not say: sequence
# 2048, microbatch 1, tensor parallel 8 (the notebook scales energy by tp = 8), the stage's share of
# layers (12; 8.75), embeddings and head left out. Backward = 2 x forward FLOPs.
PERSEUS_MODELS = {"gpt3-175b": (96, 12288), "bloom": (70, 14336)}
PERSEUS_SEQ, PERSEUS_MICROBATCH, PERSEUS_TP, PERSEUS_STAGES = 2048, 1, 8, 8


def perseus_flops_bytes(workload: str) -> tuple[float, float]:
    """(FLOPs, bytes) one GPU moves for one Perseus stage row `model/stageN/forward|backward`."""
    model, _stage, instr = workload.split("/")
    layers, h = PERSEUS_MODELS[model]
    s, tokens = PERSEUS_SEQ, PERSEUS_SEQ * PERSEUS_MICROBATCH
    per_layer = tokens * (24 * h * h + 4 * s * h)  # QKV, projection, 4h MLP (2 FLOPs/MAC) + attention
    weights = 12 * h * h * 2  # bf16 bytes of one layer's weights
    acts = tokens * h * 2 * 16  # activations read and written, ~16 tensors of tokens x h per layer (rough)
    mult = 2.0 if instr == "backward" else 1.0
    n = layers / PERSEUS_STAGES / PERSEUS_TP
    return mult * per_layer * n, mult * (weights + acts) * n


def perseus_busy(workload: str, t: float, dev: Device) -> float:
    flops, nbytes = perseus_flops_bytes(workload)
    return max(flops / dev.fp16_flops, nbytes / dev.bandwidth) / t


def dcgm_busy(row: pd.Series) -> float:
    vals = [row.get(c) for c in ("fp32_active", "fp64_active", "tensor_active", "dram_active")]
    vals = [float(v) for v in vals if v is not None and np.isfinite(v)]
    return max(vals) if vals else float("nan")


def sweep_rows(sweeps: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rows of every clock or power-limit sweep of a table device: one curve per (source, device, workload,
    knob), f the core clock (NaN: default), cap the power limit (NaN: TDP), u where known."""
    skipped: dict[str, int] = {}
    rows = []
    s = sweeps[~sweeps["default_setting"].astype(bool)].dropna(subset=["power_w", "time_s"])
    for (src, devname, wl, knob), g in s.groupby(["source", "device", "workload", "knob"], sort=True):
        if knob == "mem_clock_mhz":
            continue  # the same points as the core-clock curves at each memory clock
        dev = table_device(str(devname))
        if dev is None:
            skipped[f"{src}: device {devname} not in the table"] = skipped.get(str(devname), 0) + len(g)
            continue
        for r in g.itertuples():
            f = float(r.core_clock_mhz) if pd.notna(r.core_clock_mhz) else float("nan")
            if src == "perseus-stage-profiles":
                u = perseus_busy(str(wl), float(r.time_s), dev)
            elif src == "nv-dvfs-kernels":
                u = dcgm_busy(pd.Series(r._asdict()))
            else:
                u = float("nan")
            rows.append(
                {
                    "kind": "sweep", "source": str(src), "device": dev.name, "workload": str(wl),
                    "curve": f"{src}|{dev.name}|{wl}|{knob}", "u": u, "f": f,
                    "cap": float(r.power_limit_w) if pd.notna(r.power_limit_w) else float("nan"),
                    "p": float(r.power_w), "t": float(r.time_s), "tdp": dev.tdp_w, "f_boost": dev.boost_clock_mhz,
                }
            )  # fmt: skip
    return pd.DataFrame(rows, columns=ROW_COLUMNS), skipped


def thesis_rows(targets_dir: Path) -> pd.DataFrame:
    """Absolute rows from the thesis targets: every measured op (forward, and training forward+backward)
    and network with its busy share from its FLOPs and bytes on its device config (default clock).
    Training work counts TRAINING_WORK x the forward's FLOPs and bytes (`work_factor`)."""
    from opcost.devices import find_device
    from opcost.model.basis.physics import roofline_s

    rows = []
    for folder in sorted(Path(targets_dir).iterdir()) if Path(targets_dir).is_dir() else []:
        config, _, mode = folder.name.rpartition("-")
        found = find_device(config)
        if found is None:
            continue
        dev = found[0]
        ops_file, nets_file, nops_file = (folder / f"{n}.parquet" for n in ("operations", "networks", "network_ops"))
        if ops_file.is_file():
            ops = pd.read_parquet(ops_file)
            ops = ops[ops["p_w"].notna() & (ops["t_s"] > 0)]
            if "estimated" in ops:
                ops = ops[~ops["estimated"].fillna(False).astype(bool)]
            for r in ops.itertuples():
                mult = work_factor("training" if r.phase == "forward_backward" else "inference")
                m = {"flops": r.flops, "bytes_read": r.bytes_read, "bytes_written": r.bytes_written}
                if not all(pd.notna(v) for v in m.values()):
                    continue
                u = mult * roofline_s(str(r.kind), m, found) / float(r.t_s)
                rows.append(_abs_row("thesis-ops", dev, f"{folder.name}|{r.op_id}", u, r.p_w, r.t_s))
        if nets_file.is_file() and nops_file.is_file():
            nets, nops = pd.read_parquet(nets_file), pd.read_parquet(nops_file)
            nops = nops.dropna(subset=["flops", "bytes_read", "bytes_written"])
            roof = pd.Series(
                [float(r["calls"]) * roofline_s(str(r["kind"]), r, found) for r in nops.to_dict("records")],
                index=nops.index, dtype=float,
            )  # fmt: skip
            per_set = roof.groupby(nops["set_id"]).sum() if len(nops) else pd.Series(dtype=float)
            mult = work_factor(mode)
            for r in nets.itertuples():
                if pd.isna(r.p_w) or r.set_id not in per_set.index:
                    continue
                u = mult * float(per_set[r.set_id]) / float(r.t_s)
                rows.append(_abs_row("thesis-networks", dev, f"{folder.name}|{r.set_id}", u, r.p_w, r.t_s))
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def _abs_row(source: str, dev: Device, workload: str, u: float, p: float, t: float) -> dict[str, Any]:
    return {
        "kind": "absolute", "source": source, "device": dev.name, "workload": workload, "curve": workload,
        "u": float(u), "f": float("nan"), "cap": float("nan"), "p": float(p), "t": float(t), "tdp": dev.tdp_w,
        "f_boost": dev.boost_clock_mhz,
    }  # fmt: skip


CHECK_FILE = "energy_counter_check.json"  # measure/energycheck.py's record in a campaign's raw folder
MATMUL_SOURCE = "matmul-check"


def check_rows(raw_root: Path | None) -> pd.DataFrame:
    """Absolute rows from our campaigns' energy counter checks (data/raw/<campaign>/energy_counter_check.json,
    measure/energycheck.py): `matmuls` fp32 size x size matmuls back to back for `seconds`, at the counter's
    average power. Busy share: their FLOPs over the FP32 peak (PyTorch leaves cuBLAS TF32 off) over the time.
    Why: the H200's 667-683 W there is the only sustained, near-peak load of a card above 400 W."""
    rows = []
    for f in sorted(Path(raw_root).glob(f"*/{CHECK_FILE}")) if raw_root is not None else []:
        d = read_json_model(f, "energy counter check", "profile")
        dev = table_device(str(d.get("device_name", "")))
        if dev is None or not all(isinstance(d.get(k), (int, float)) for k in ("matmul_size", "matmuls", "seconds")):
            continue
        n, k, sec, p = float(d["matmul_size"]), float(d["matmuls"]), float(d["seconds"]), d.get("counter_power_w")
        if not (isinstance(p, (int, float)) and p > 0 and k > 0 and sec > 0):
            continue
        u = 2 * n**3 * k / dev.fp32_flops / sec
        rows.append(_abs_row(MATMUL_SOURCE, dev, f"{f.parent.name}|matmul{int(n)}", u, float(p), sec / k))
    # a check landed with two campaigns from one archive (visit-h200, visit-h200-more) is one measurement
    return pd.DataFrame(rows, columns=ROW_COLUMNS).drop_duplicates(["device", "p", "t"]).reset_index(drop=True)


def all_rows(
    sweeps: pd.DataFrame, targets_dir: Path, raw_root: Path | None = None
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Every power row: sweep points (curves) plus absolute rows (thesis, our campaigns' matmul checks under
    `raw_root`, and sweep points whose busy share is known, each also an absolute row), with the reference of
    each curve."""
    sw, skipped = sweep_rows(sweeps)
    th, ck = thesis_rows(targets_dir), check_rows(raw_root)
    if len(ck):
        th = pd.concat([th, ck], ignore_index=True) if len(th) else ck
    known = sw[sw["u"].notna()].assign(kind="absolute")
    rows = pd.concat([f for f in (th, known, sw) if len(f)], ignore_index=True) if len(sw) or len(th) else sw
    for c in ("u", "f", "cap", "p", "t", "tdp", "f_boost"):
        rows[c] = rows[c].astype(float)
    rows["x"] = np.where(rows["f"].isna(), 1.0, rows["f"] / rows["f_boost"])
    sweep = rows["kind"] == "sweep"
    n = rows[sweep].groupby("curve")["p"].transform("size")
    rows = rows.drop(index=n[n < 2].index).reset_index(drop=True)
    sweep = rows["kind"] == "sweep"
    # a curve's reference: its highest clock, else (power-limit sweeps) its highest limit
    key = rows["f"].fillna(0) + rows["cap"].fillna(0)
    ref_idx = key[sweep].groupby(rows.loc[sweep, "curve"]).idxmax()
    rows["is_ref"] = False
    rows.loc[ref_idx.to_numpy(), "is_ref"] = True
    ref = rows.loc[ref_idx.to_numpy(), ["curve", "p", "x"]].rename(columns={"p": "p_ref", "x": "x_ref"})
    rows = rows.merge(ref, on="curve", how="left")
    rows.loc[rows["kind"] != "sweep", ["p_ref", "x_ref"]] = np.nan
    return rows, skipped


# -- fitting -------------------------------------------------------------------------------------
def weights(rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Each (kind, device) weighs the same; within it each source the same; within a source each row."""
    per_src = rows.groupby(["kind", "device", "source"])["p"].transform("size")
    src_per = rows.groupby(["kind", "device"])["source"].transform("nunique")
    w: npt.NDArray[np.float64] = (1.0 / (per_src * src_per)).to_numpy(float)
    return w  # typed here: pandas has no type information


def predict_rows(model: PowerModel, rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Predicted power of every row: absolute rows from (u, x); sweep rows from their curve's reference."""
    p_abs = model.power(rows["u"].fillna(0).to_numpy(float), rows["x"], rows["tdp"], rows["cap"])
    d_ref = model.level_from_power(rows["p_ref"].to_numpy(float), rows["x_ref"], rows["tdp"])
    p_sw = model.power_from_level(d_ref, rows["x"], rows["tdp"], rows["cap"])
    return np.where(rows["kind"].to_numpy() == "sweep", p_sw, p_abs)


def fit(rows: pd.DataFrame) -> PowerModel:
    """Least squares of relative power errors over absolute rows and off-reference sweep points."""
    from opcost.model.basis.lsq import least_squares

    train = rows[~rows["is_ref"].astype(bool)]
    if train.empty:
        raise OpcostError("no power rows to fit the power model on")
    w = np.sqrt(weights(train))
    p: npt.NDArray[np.float64] = train["p"].to_numpy(float)  # typed here: pandas has no type information
    probe = PowerModel()

    def res(q: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        probe.idle, probe.a, probe.b, probe.c, probe.gamma = (float(v) for v in q)
        return w * (predict_rows(probe, train) / p - 1.0)

    lo, hi = [0.0, -1.0, -2.0, 0.1, 0.3], [0.9, 1.5, 3.0, 3.0, 6.0]
    q = least_squares(res, [[0.25, 0.3, 0.6, 1.0, 2.0]], (lo, hi))
    return PowerModel(
        idle=float(q[0]), a=float(q[1]), b=float(q[2]), c=float(q[3]), gamma=float(q[4]),
        trained_on=sorted(set(rows["device"])), n_rows=int(len(rows)),
    )  # fmt: skip


NETWORK_SOURCE = "thesis-networks"  # absolute rows of whole networks we measured (thesis targets, our campaigns)


def device_levels(model: PowerModel, rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per device with measured networks (absolute rows of NETWORK_SOURCE): the geometric mean of measured over
    modelled power (model/crossdevice/fewshot.power_level) and how many networks show it. Why: the form's miss on a GPU
    is one level for all its networks (the A30 at 164 W on every network, modelled 95-118 W; the RTX 2080 Ti at 150 W,
    modelled 250 W), which one measured network fixes (leave one GPU out, each network in turn:
    reports/validate/xdevice_energy_fewshot.csv). The leave-one-GPU-out scores never use a level."""
    from opcost.model.crossdevice.fewshot import power_level

    a = rows[(rows["kind"] == "absolute") & (rows["source"] == NETWORK_SOURCE)]
    out = {}
    for dev, g in a.groupby("device", sort=True):
        p_hat = model.power(g["u"].to_numpy(float), g["x"], g["tdp"], g["cap"])
        out[str(dev)] = {"factor": power_level(g["p"], p_hat), "networks": float(len(g))}
    return out


def leave_one_gpu_out(
    rows: pd.DataFrame, learner: Callable[[pd.DataFrame], PowerModel] = fit
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Every GPU's rows predicted by a model fitted on the other GPUs only; and what each fit saw."""
    out, seen = [], {}
    for dev in sorted(set(rows["device"])):
        train, held = rows[rows["device"] != dev], rows[rows["device"] == dev]
        if train.empty:
            continue
        model = learner(train)
        seen[dev] = sorted(set(train["device"]))
        out.append(held.assign(p_hat=predict_rows(model, held)))
    return pd.concat(out, ignore_index=True), seen


def scores(pred: pd.DataFrame) -> pd.DataFrame:
    """Per device x kind x source: power MAPE, median APE, time-weighted APE and R^2 (energy with the
    measured time equals power; off-reference points of curves only)."""
    rows = []
    scored = pred[~pred["is_ref"].astype(bool)]
    for (dev, kind, src), g in scored.groupby(["device", "kind", "source"], sort=True):
        ape = (g["p_hat"] / g["p"] - 1).abs().to_numpy(float)
        e, e_hat = (g["p"] * g["t"]).to_numpy(float), (g["p_hat"] * g["t"]).to_numpy(float)
        ss = float(((e - e_hat) ** 2).sum())
        tot = float(((e - e.mean()) ** 2).sum())
        rows.append(
            {
                "device": dev, "kind": kind, "source": src, "rows": int(len(g)),
                "power_mape": 100 * float(ape.mean()), "power_mdape": 100 * float(np.median(ape)),
                "energy_time_weighted": 100 * float(np.abs(e_hat - e).sum() / e.sum()),
                "energy_r2": 1 - ss / tot if tot > 0 else float("nan"),
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def rel_err90(pred: pd.DataFrame) -> float:
    a = pred[pred["kind"] == "absolute"]
    return float(np.quantile((a["p_hat"] / a["p"] - 1).abs(), 0.9)) if len(a) else float("nan")
