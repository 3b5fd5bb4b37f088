"""The clock model: how an op's (kernel's, workload's) time and power change with the GPU core clock.

Nobody on this fleet can lock clocks, so the behaviour is learned from public core-clock sweeps (Perseus,
NV-DVFS, GPU-FREQUENCY-DVFS) and transferred to any device of the table from one reference point: the cost
at the reference clock f_ref (the device's boost clock, or a sweep's highest clock). A few global parameters,
fitted by least squares on relative errors (`fit`, each GPU weighing the same), stored as JSON:

    t(f) = t_ref (s f_ref / f + 1 - s)      s: compute-bound share (roofline, observed, or fitted fallback)
    P(f) = P_static + P_dyn g(f / f_boost) / g(f_ref / f_boost),  g(y) = y V(y)^2,  at most max(TDP, P_ref)
    E(f) = P(f) t(f)

with a memory-path knee on pre-Ampere GPUs and, for a reference drawing its TDP, the clock it actually ran
at (`ClockModel.soft_cap_clock`). The form, each term's why, validation and what was tried: docs/clocks.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost.devices import DEVICES, NOMINAL_MEMORY_CLOCK_MHZ, Device, DeviceConfig, table_device
from opcost.errors import OpcostError
from opcost.io import read_json_model, write_json
from opcost.model.basis.arrays import Floats
from opcost.params.clock import ClockParams

CLOCK_MODEL_FILE = "clock_model.json"
FORMAT = 1
CORE_KNOB = "core_clock_mhz"
MIN_POINTS = ClockParams.min_points  # a curve needs its reference and at least two other clocks (config)


def _sigmoid(x: Floats) -> npt.NDArray[np.float64]:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def time_ratio(
    f: Floats,
    f_ref: Floats,
    s: Floats,
    memory_growth: Floats = 1.0,
) -> npt.NDArray[np.float64]:
    """t(f) / t_ref = 1 + s (f_ref / f - 1) + (1 - s) (g - 1): the compute-bound share s follows 1 / f, the rest
    grows by g (the memory-path knee's growth, `ClockModel.predict`; 1: none, the rest clock-free). Written as 1 plus
    changes so that it is exactly 1 at f_ref (both changes 0 there); non-increasing in f for s in [0, 1]."""
    s = np.clip(np.asarray(s, np.float64), 0.0, 1.0)
    compute = 1.0 + s * (np.asarray(f_ref, np.float64) / np.asarray(f, np.float64) - 1.0)
    return compute + (1.0 - s) * (np.asarray(memory_growth, np.float64) - 1.0)


GUESS_SHARES = (1.0, 0.5, 0.0)  # the zero-parameter time guesses' compute-bound shares (docs/clocks.md)
GUESS_POWER_EXPS = (1.0, 0.0)  # the zero-parameter power guesses: P = P_ref (f / f_ref)^k


def guess_values(
    f: Floats,
    f_ref: Floats,
    t_ref: Floats,
    p_ref: Floats,
) -> tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.float64]]]:
    """Every zero-parameter guess's (times, powers) from the reference point alone: one array per
    GUESS_SHARES entry and one per GUESS_POWER_EXPS entry."""
    f, f_ref = np.asarray(f, np.float64), np.asarray(f_ref, np.float64)
    t_ref, p_ref = np.asarray(t_ref, np.float64), np.asarray(p_ref, np.float64)
    times = [t_ref * time_ratio(f, f_ref, s) for s in GUESS_SHARES]
    powers = [p_ref * (f / f_ref) ** k for k in GUESS_POWER_EXPS]
    return times, powers


CAP_BAND = (0.95, 1.03)  # P_ref / TDP that marks a power-capped reference (above: a board limit beyond TDP)
CAP_K = 0.0  # a capped reference ran at the base clock (not fitted; see ClockModel.cap_k)


def memory_share(bytes_moved: Floats, bandwidth: float, t_ref: Floats) -> npt.NDArray[np.float64]:
    """Compute-bound share from the reference time: 1 - (bytes / bandwidth) / t_ref, the part of the time
    the DRAM is not transferring (compute, latency, launch: all run on the core clock). The same
    quantity as 1 - DCGM DRAM activity, which validates it (reports/clock/vs_guesses.csv)."""
    busy = np.asarray(bytes_moved, np.float64) / bandwidth / np.maximum(np.asarray(t_ref, np.float64), 1e-12)
    return 1.0 - np.clip(busy, 0.0, 1.0)


def memory_clock_share(s0: Floats, mem_ratio: Floats) -> npt.NDArray[np.float64]:
    """The compute-bound share at a memory clock `mem_ratio` times the nominal one, from the share s0 at the
    nominal memory clock: the memory-bound time scales with 1 / bandwidth, i.e. 1 / mem_ratio, the core-clock
    time does not, so s = s0 / (s0 + (1 - s0) / mem_ratio). No parameter: bandwidth is proportional to the
    memory clock. NaN or non-positive ratios leave s0 unchanged (memory clock unknown: nominal)."""
    s0 = np.clip(np.asarray(s0, np.float64), 0.0, 1.0)
    r = np.asarray(mem_ratio, np.float64)
    r = np.where(np.isfinite(r) & (r > 0), r, 1.0)
    return s0 / np.maximum(s0 + (1.0 - s0) / r, 1e-12)


def reference_clock_share(
    s0: Floats,
    f_ref: Floats,
    f_boost: Floats,
) -> npt.NDArray[np.float64]:
    """The compute-bound share at a reference clock f_ref from the share s0 at the boost clock: the compute-bound
    time scales with 1 / f, the rest does not, so s = s0 / (s0 + (1 - s0) f_ref / f_boost) (`memory_clock_share`
    with the ratio f_boost / f_ref; no parameter). The fallback share (`ClockModel.share_from_power`) is a share at
    the boost clock; a sweep whose top clock, its reference, lies above the boost clock (the RTX 3080 Ti's, 1.14-1.18
    f_boost) spends less of its reference time computing. Identity at f_ref = f_boost."""
    return memory_clock_share(s0, np.asarray(f_boost, np.float64) / np.asarray(f_ref, np.float64))


KNEE_ARCHITECTURES = ("Maxwell", "Pascal", "Volta", "Turing")  # where the memory-path knee is modelled (docstring)


def knee_bandwidth_per_sm(device: Device, mem_ratio: float = float("nan")) -> float:
    """Bandwidth per SM (B/s) at the memory clock ratio (NaN: nominal) for a device whose memory-path knee is
    modelled (KNEE_ARCHITECTURES), else NaN (no knee)."""
    if device.architecture not in KNEE_ARCHITECTURES:
        return float("nan")
    r = mem_ratio if math.isfinite(mem_ratio) and mem_ratio > 0 else 1.0
    return device.bandwidth * r / device.sms


def memory_knee_mhz(bw_per_sm: Floats, knee_q: float) -> npt.NDArray[np.float64]:
    """The clock (MHz) below which the SMs cannot issue the DRAM's bandwidth: bandwidth per SM / (q B per cycle);
    0 (no knee) where bw_per_sm is NaN or knee_q is 0."""
    bw = np.nan_to_num(np.asarray(bw_per_sm, np.float64), nan=0.0)
    return bw / knee_q / 1e6 if knee_q > 0 else np.zeros_like(bw)


VOLT_KNEE_K = 100.0  # sharpness of the voltage floor's knee (a smooth max: real V/f curves bend, fits need a gradient)
BALANCE_REF = 30.0  # FLOP/B: machine balance at which the balance term of the fallback share is zero


def roofline_share(flops: float, bytes_moved: float, peak: float, bandwidth: float) -> float:
    """The compute-bound share of an op's time by the roofline: t_c / (t_c + t_m) = I / (I + ridge)."""
    tc, tm = max(float(flops), 0.0) / peak, max(float(bytes_moved), 0.0) / bandwidth
    return tc / (tc + tm) if tc + tm > 0 else 0.0


@dataclass
class ClockModel:
    """The fitted global parameters (docs/clocks.md) and what they were fitted and judged on."""

    share_a: float = 0.0
    share_b: float = 0.0
    # The fallback share's machine-balance term: + share_balance * log(balance / BALANCE_REF) inside the
    # sigmoid (a device whose FLOPs outrun its memory leaves a kernel of unknown intensity more memory-bound).
    share_balance: float = 0.0
    static_frac: float = 0.3
    # The power that does not follow the core clock grows with the memory-bound part of the time: DRAM
    # and memory-controller power depends on the traffic rate, which a memory-bound kernel keeps at any core
    # clock. Static fraction of the reference power = static_frac + static_mem (1 - s) (`static_fraction`).
    static_mem: float = 0.0
    gamma: float = 2.0
    # DVFS voltage curve (docs/clocks.md): V(y) = max(volt_min, 1 - volt_slope (1 - y)), y = f / f_boost.
    # The defaults (1, 0) make V = y, i.e. P_dyn ~ (f / f_ref)^gamma.
    volt_slope: float = 1.0
    volt_min: float = 0.0
    # Power cap: a reference drawing within CAP_BAND of the TDP ran throttled; its clock was really
    # f_base + cap_k (f_ref - f_base), and no requested clock above that is reached. `fit` sets CAP_K (the base
    # clock, from the device table); the field stays so that a model can state another rule.
    cap_k: float = 1.0
    # Observed shares are estimates, each biased its own way (fitted, one factor per estimator, applied
    # before the clip to [0, 1]): 1 - (bytes / bandwidth) / t_ref (Perseus stages; the roofline share of
    # network ops is the same kind of estimate and takes the same factor) counts as clock-bound every
    # non-DRAM part, including time that does not follow the core clock (< 1); 1 - DCGM DRAM activity
    # (NV-DVFS) counts a DRAM-busy kernel as clock-free though its requests are issued at the core clock (> 1).
    share_scale_bytes: float = 1.0
    share_scale_dram: float = 1.0
    # Memory-path knee (docs/clocks.md): bytes per SM per core cycle the SMs can request; 0: no knee.
    knee_q: float = 0.0
    # Stacking (model/clocks/clockval.stacked): the shipped time and power are convex blends of the physical form
    # and the zero-parameter guesses, the weights chosen by an inner leave-one-GPU-out on the training GPUs
    # only. Time: [physical, compute-bound (s = 1), half (s = 0.5), memory-bound (s = 0)]; power: [physical,
    # P ~ f, P constant] (GUESS_SHARES, GUESS_POWER_EXPS). The defaults are the physical form alone.
    time_blend: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])
    power_blend: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0])
    trained_on: list[str] = field(default_factory=list)  # device-table names
    n_curves: int = 0
    n_points: int = 0
    # Leave-one-GPU-out relative errors pooled over GPUs (time, power, energy MAPE): what predictions
    # widen their intervals by; filled by the train-clock stage.
    logo_error: dict[str, float] = field(default_factory=dict)
    # The same by how far the clock is from the reference: [[upper f/f_ref of the bin, time, energy], ...]
    # ascending; at f_ref itself the model adds no error (the reference is its input).
    logo_error_bins: list[list[float]] = field(default_factory=list)

    def error_at(self, ratio: float) -> tuple[float, float]:
        """(time, energy) relative leave-one-GPU-out error at clock ratio f / f_ref (0, 0 at f_ref)."""
        if ratio == 1.0 or not self.logo_error_bins:
            return (
                (0.0, 0.0) if ratio == 1.0 else (self.logo_error.get("time", 0.0), self.logo_error.get("energy", 0.0))
            )
        r = min(ratio, 1 / ratio) if ratio > 1 else ratio  # above the reference: mirrored onto the nearest bins
        for hi, et, ee in self.logo_error_bins:
            if r <= hi:
                return et, ee
        return self.logo_error_bins[-1][1], self.logo_error_bins[-1][2]

    # -- the form --------------------------------------------------------------------------
    def share_from_power(
        self,
        p_ref: Floats,
        tdp: Floats,
        balance: Floats | None = None,
        mem_ratio: Floats | None = None,
    ) -> npt.NDArray[np.float64]:
        """Compute-bound share when FLOPs/bytes are unknown: sigmoid(a + b P_ref / TDP + c log(balance /
        BALANCE_REF)) at the nominal memory clock (`balance` None: the balance term is left out), moved to
        the curve's memory clock by `memory_clock_share` (`mem_ratio` None: nominal). Nothing here comes from
        the curve's other clocks: the reference power, the device table and the memory clock setting."""
        z = self.share_a + self.share_b * np.asarray(p_ref, np.float64) / np.asarray(tdp, np.float64)
        if balance is not None:
            z = z + self.share_balance * np.log(np.asarray(balance, np.float64) / BALANCE_REF)
        s0 = _sigmoid(z)
        return s0 if mem_ratio is None else memory_clock_share(s0, mem_ratio)

    def dvfs(self, y: Floats) -> npt.NDArray[np.float64]:
        """g(y) = y V(y)^(gamma - 1), the dynamic power's clock dependence at y = f / f_boost (increasing in y)."""
        y = np.maximum(np.asarray(y, np.float64), 1e-9)
        lin = 1.0 - self.volt_slope * (1.0 - y)
        v = np.maximum(self.volt_min + np.logaddexp(0.0, VOLT_KNEE_K * (lin - self.volt_min)) / VOLT_KNEE_K, 1e-9)
        return y * v ** (self.gamma - 1.0)

    def static_fraction(self, share: Floats | None = None) -> npt.NDArray[np.float64]:
        """The part of min(TDP, P_ref) that does not follow the core clock: static_frac + static_mem (1 - s),
        at most STATIC_MAX; `share` None: a compute-bound op (s = 1), static_frac alone."""
        s = 1.0 if share is None else np.clip(np.asarray(share, np.float64), 0.0, 1.0)
        return np.minimum(self.static_frac + self.static_mem * (1.0 - s), STATIC_MAX)

    def power(
        self,
        f: Floats,
        f_ref: Floats,
        p_ref: Floats,
        tdp: Floats,
        f_boost: Floats | None = None,
        share: Floats | None = None,
    ) -> npt.NDArray[np.float64]:
        """P(f) = P_static + (P_ref - P_static) g(f / f_boost) / g(f_ref / f_boost), capped at max(TDP, P_ref);
        `f_boost` None: the reference clock is the boost clock; `share`: the compute-bound share (static part)."""
        p_ref, tdp = np.asarray(p_ref, np.float64), np.asarray(tdp, np.float64)
        static = self.static_fraction(share) * np.minimum(tdp, p_ref)
        fb = np.asarray(f_ref if f_boost is None else f_boost, np.float64)
        shape = self.dvfs(np.asarray(f, np.float64) / fb) / self.dvfs(np.asarray(f_ref, np.float64) / fb)
        return np.minimum(static + (p_ref - static) * shape, np.maximum(tdp, p_ref))

    def reached_clock(
        self,
        f_ref: Floats,
        f_base: Floats,
        p_ref: Floats,
        tdp: Floats,
        share: Floats | None = None,
        f_boost: Floats | None = None,
    ) -> npt.NDArray[np.float64]:
        """The clock the reference really ran at: f_ref, or, where its power sat at the TDP (CAP_BAND), a
        throttled clock never below f_base + cap_k (f_ref - f_base) nor above f_ref. `share` None: that
        lower bound itself (the hard cap). With the compute-bound share, the soft cap (`soft_cap_clock`): the
        clock where the model's own power curve of this op reaches the reference power."""
        f_ref, f_base = np.asarray(f_ref, np.float64), np.asarray(f_base, np.float64)
        r = np.asarray(p_ref, np.float64) / np.asarray(tdp, np.float64)
        capped = (r >= CAP_BAND[0]) & (r <= CAP_BAND[1])
        throttled = np.minimum(f_ref, np.minimum(f_base, f_ref) + self.cap_k * np.maximum(f_ref - f_base, 0.0))
        if share is not None:
            soft = self.soft_cap_clock(f_ref, f_base, p_ref, tdp, share, f_boost)
            throttled = np.minimum(f_ref, np.maximum(throttled, soft))
        return np.where(capped, throttled, f_ref)

    def soft_cap_clock(
        self,
        f_ref: Floats,
        f_base: Floats,
        p_ref: Floats,
        tdp: Floats,
        share: Floats,
        f_boost: Floats | None = None,
    ) -> npt.NDArray[np.float64]:
        """Where a power-capped op really ran, from the model alone (no fitted parameter). The base clock is
        the clock a board sustains at its TDP under a full load (devices.py): there a fully compute-bound op
        draws TDP = S + D. An op of compute-bound share s keeps its SMs busy only that share of the time, so
        its dynamic power is s D g(f / f_boost) / g(f_base / f_boost) (S: its static part, `static_fraction`).
        The board raises the clock until that reaches the reference power: the root of
        S + s (TDP - S) g(f_c) / g(f_base) = P_ref, i.e. g(f_c) = g(f_base) (P_ref - S) / (s (TDP - S)),
        found by bisection on the increasing g between f_base and f_ref (clipped there: s = 1 gives the base
        clock, a memory-bound op that never reaches the limit gives f_ref). The A40's Perseus stages (P_ref
        0.98 TDP) reach ~0.85 f_ref, where their measured power stops rising, not the base clock (0.75)."""
        p_ref, tdp, s, f_ref, f_base = np.broadcast_arrays(
            *(np.asarray(v, np.float64) for v in (p_ref, tdp, share, f_ref, f_base))
        )
        fb = np.broadcast_to(np.asarray(f_ref if f_boost is None else f_boost, np.float64), p_ref.shape)
        s = np.clip(s, 1e-9, 1.0)
        static = self.static_fraction(s) * np.minimum(tdp, p_ref)
        lo, hi = np.minimum(f_base, f_ref) / fb, f_ref / fb
        ratio = np.maximum(p_ref - static, 0.0) / (s * np.maximum(tdp - static, 1e-12))
        need = self.dvfs(lo) * ratio
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            below = self.dvfs(mid) < need
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.clip(hi * fb, np.minimum(f_base, f_ref), f_ref)

    def predict(
        self,
        f: Floats,
        f_ref: float,
        t_ref: Floats,
        p_ref: Floats,
        tdp: float,
        share: Floats | None = None,
        f_base: Floats | None = None,
        f_boost: Floats | None = None,
        balance: Floats | None = None,
        mem_ratio: Floats | None = None,
        soft_cap: bool = True,
        bw_per_sm: Floats | None = None,
        share_weight: Floats | None = None,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(time, power, energy) at clock(s) f from the reference point; `share` None (or NaN entries): from
        P_ref / TDP, moved from the boost clock to f_ref (`reference_clock_share`; the requested reference clock,
        also for a capped reference, whose reached clock depends on the share); `f_base` None: no throttled
        reference is considered; `f_boost` None: f_ref is the boost clock (where the DVFS curve is placed);
        `balance`, `mem_ratio`: the fallback share's machine balance and memory-clock ratio (`share_from_power`);
        `soft_cap` False: a capped reference ran at the hard cap's clock (`reached_clock` without a share; what
        `fit` scores the share scales with); `bw_per_sm`: bandwidth per SM where the memory-path knee applies
        (`knee_bandwidth_per_sm`; None or NaN: no knee); `share_weight`: the part of t_ref the given `share` speaks
        for (`explained_fraction`; the fallback share takes the rest; None or NaN: all of it)."""
        s = self.share_from_power(p_ref, tdp, balance, mem_ratio)
        if f_boost is not None:  # the fallback is a share at the boost clock: moved to the reference clock
            s = reference_clock_share(s, f_ref, f_boost)
        if share is not None:
            given = np.asarray(share, np.float64)
            if share_weight is not None:  # the given share speaks for that part of t_ref, the fallback for the rest
                w = np.clip(np.nan_to_num(np.asarray(share_weight, np.float64), nan=1.0), 0.0, 1.0)
                given = w * np.clip(given, 0.0, 1.0) + (1.0 - w) * s
            s = np.where(np.isfinite(given), given, s)
        fb = np.asarray(f_ref if f_boost is None else f_boost, np.float64)
        sc = s if soft_cap else None
        fc = np.asarray(f_ref if f_base is None else self.reached_clock(f_ref, f_base, p_ref, tdp, sc, fb), np.float64)
        top = np.where(fc < np.asarray(f_ref, np.float64), fc, self.power_capped_clock(fc, p_ref, tdp, fb, s))
        f_eff = np.minimum(np.asarray(f, np.float64), top)
        growth: Floats = 1.0  # the memory-bound part's growth below the memory-path knee
        if bw_per_sm is not None and self.knee_q > 0:
            fk = memory_knee_mhz(bw_per_sm, self.knee_q)
            growth = np.maximum(1.0, fk / f_eff) / np.maximum(1.0, fk / fc)
        t = np.asarray(t_ref, np.float64) * time_ratio(f_eff, fc, s, growth)
        p = self.power(f_eff, fc, p_ref, tdp, fb, s)
        if self.time_blend[0] != 1.0 or self.power_blend[0] != 1.0:
            t, p = self.blend(t, p, f, f_ref, t_ref, p_ref)
        return t, p, t * p

    def blend(
        self,
        t_phys: npt.NDArray[np.float64],
        p_phys: npt.NDArray[np.float64],
        f: Floats,
        f_ref: Floats,
        t_ref: Floats,
        p_ref: Floats,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The stacked (time, power): `time_blend` / `power_blend` weights on the physical values and on the
        guesses' (`guess_values`), which use the requested clock and the reference as given."""
        tg, pg = guess_values(f, f_ref, t_ref, p_ref)
        wt, wp = self.time_blend, self.power_blend
        t = wt[0] * np.asarray(t_phys, np.float64) + sum(w * g for w, g in zip(wt[1:], tg))
        p = wp[0] * np.asarray(p_phys, np.float64) + sum(w * g for w, g in zip(wp[1:], pg))
        return t, p

    def power_capped_clock(
        self,
        f_ref: Floats,
        p_ref: Floats,
        tdp: Floats,
        f_boost: Floats | None = None,
        share: Floats | None = None,
    ) -> npt.NDArray[np.float64]:
        """The clock at which the power law reaches the cap max(TDP, P_ref): a board asked for more runs
        there (it throttles), so above it neither time nor power changes. Never below f_ref. The DVFS
        curve is increasing, so the crossing is found by bisection on y = f / f_boost (to 1e-9 relative)."""
        p_ref, tdp = np.broadcast_arrays(np.asarray(p_ref, np.float64), np.asarray(tdp, np.float64))
        f_ref = np.broadcast_to(np.asarray(f_ref, np.float64), p_ref.shape)
        fb = np.broadcast_to(np.asarray(f_ref if f_boost is None else f_boost, np.float64), p_ref.shape)
        static = self.static_fraction(share) * np.minimum(tdp, p_ref)
        dyn = np.maximum(p_ref - static, 1e-12)
        need = np.maximum((np.maximum(tdp, p_ref) - static) / dyn, 1.0) * self.dvfs(f_ref / fb)  # g at the cap
        lo, hi = f_ref / fb, f_ref / fb
        for _ in range(200):  # grow the bracket until g(hi) reaches the cap (g grows at least like y)
            short = self.dvfs(hi) < need
            if not short.any():
                break
            hi = np.where(short, 2.0 * hi, hi)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            below = self.dvfs(mid) < need
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.maximum(hi * fb, f_ref)

    def at_clock(
        self,
        device: Device,
        f: float,
        t_ref: npt.NDArray[np.float64],
        p_ref: npt.NDArray[np.float64],
        share: npt.NDArray[np.float64],
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per-op (time, power) at core clock f on `device`, from costs at its boost clock."""
        check_clock(device, f)
        share = np.asarray(share, np.float64) * self.share_scale_bytes  # a roofline share: a bytes-and-FLOPs estimate
        t, p, _ = self.predict(
            f, device.boost_clock_mhz, t_ref, p_ref, device.tdp_w, share, device.base_clock_mhz,
            balance=device.ridge_point, bw_per_sm=knee_bandwidth_per_sm(device),
        )  # fmt: skip
        return t, p

    # -- storage (data only) ---------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, folder: Path) -> None:
        write_json(self.to_json(), Path(folder) / CLOCK_MODEL_FILE)

    @classmethod
    def from_json(cls, d: Any, where: str = "clock model") -> "ClockModel":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise OpcostError(f"{where} is not a clock model of format {FORMAT}; refused")
        try:
            m = cls(
                share_a=float(d["share_a"]),
                share_b=float(d["share_b"]),
                share_balance=float(d.get("share_balance", 0.0)),
                static_frac=float(d["static_frac"]),
                static_mem=float(d.get("static_mem", 0.0)),
                gamma=float(d["gamma"]),
                cap_k=float(d.get("cap_k", 1.0)),
                share_scale_bytes=float(d.get("share_scale_bytes", 1.0)),
                share_scale_dram=float(d.get("share_scale_dram", 1.0)),
                knee_q=float(d.get("knee_q", 0.0)),
                volt_slope=float(d.get("volt_slope", 1.0)),
                volt_min=float(d.get("volt_min", 0.0)),
                time_blend=[float(x) for x in d.get("time_blend", [1.0, 0.0, 0.0, 0.0])],
                power_blend=[float(x) for x in d.get("power_blend", [1.0, 0.0, 0.0])],
                trained_on=[str(x) for x in d.get("trained_on", [])],
                n_curves=int(d.get("n_curves", 0)),
                n_points=int(d.get("n_points", 0)),
                logo_error={str(k): float(v) for k, v in d.get("logo_error", {}).items()},
                logo_error_bins=[[float(x) for x in b] for b in d.get("logo_error_bins", [])],
            )
            assert all(len(b) == 3 for b in m.logo_error_bins)
            assert len(m.time_blend) == 1 + len(GUESS_SHARES) and len(m.power_blend) == 1 + len(GUESS_POWER_EXPS)
        except (KeyError, TypeError, ValueError, AssertionError):
            raise OpcostError(f"{where} lacks a parameter or holds a non-number; refused") from None
        values = [m.share_a, m.share_b, m.share_balance, m.static_frac, m.static_mem, m.gamma, m.cap_k]
        values += [m.volt_slope, m.volt_min]
        values += [m.share_scale_bytes, m.share_scale_dram, m.knee_q]
        values += list(m.logo_error.values())
        values += [x for b in m.logo_error_bins for x in b]
        in_range = 0 <= m.static_frac < 1 and 0 <= m.static_mem < 1 and m.gamma > 1 and 0 <= m.cap_k <= 1
        in_range = in_range and m.volt_slope >= 0 and 0 <= m.volt_min <= 1
        in_range = in_range and m.share_scale_bytes > 0 and m.share_scale_dram > 0 and m.knee_q >= 0
        values += m.time_blend + m.power_blend
        convex = all(min(b) >= 0 and abs(sum(b) - 1) < 1e-6 for b in (m.time_blend, m.power_blend))
        if not all(math.isfinite(v) for v in values) or not in_range or not convex:
            raise OpcostError(
                f"{where}: parameters out of range (static_frac in [0, 1), gamma > 1, cap_k in [0, 1], "
                "volt_slope >= 0, volt_min in [0, 1], share scales > 0, knee_q >= 0, time_blend and power_blend "
                "non-negative summing to 1); refused"
            )
        return m

    @classmethod
    def load(cls, folder: Path) -> "ClockModel":
        f = Path(folder) / CLOCK_MODEL_FILE
        return cls.from_json(read_json_model(f, "clock model", "train-clock"), str(f))


def check_clock(device: Device, f: float) -> None:
    """Refuse a clock outside the device's supported range, naming the range."""
    lo, hi = device.clock_range_mhz
    if not (math.isfinite(f) and lo <= f <= hi):
        raise OpcostError(f"--clock {f:g} MHz is outside the {device.name}'s supported range {lo:g}-{hi:g} MHz")


def check_device_clock(device: DeviceConfig | None, f: float) -> None:
    """`check_clock` for a resolved device config; None, a device the table does not know, passes (nothing to
    check)."""
    if device is not None:
        check_clock(device.device, f)


# -- curves from the sweeps table -------------------------------------------------------------
CURVE_COLUMNS = ["curve", "source", "device", "workload", "kernel", "f", "t", "p", "e"]


def sweep_curves(sweeps: pd.DataFrame, min_points: int = MIN_POINTS) -> tuple[pd.DataFrame, dict[str, int]]:
    """The core-clock curves the model learns from: one per (source, device, workload), points sorted
    by clock, each with its reference (highest clock) point, the device's TDP and the curve's kernel
    (the workload without its `@mem...` suffix: what leave-one-kernel-out holds out together).
    Returns the points and counts of what was skipped and why."""
    skipped: dict[str, int] = {}
    core = sweeps[(sweeps["knob"] == CORE_KNOB) & ~sweeps["default_setting"].astype(bool)]
    for knob, n in sweeps[sweeps["knob"] != CORE_KNOB]["knob"].value_counts().items():
        skipped[f"knob {knob} (not modelled)"] = int(n)
    frames = []
    for (src, dev, wl), g in core.groupby(["source", "device", "workload"], sort=True):
        d = table_device(str(dev))
        if d is None:
            skipped["device not in the device table"] = skipped.get("device not in the device table", 0) + len(g)
            continue
        g = g.dropna(subset=["value", "time_s", "power_w"]).groupby("value", as_index=False)
        g = g[["time_s", "power_w", "dram_active", "mem_clock_mhz"]].mean().sort_values("value")
        if len(g) < min_points:
            skipped[f"curve with fewer than {min_points} clocks"] = skipped.get(
                f"curve with fewer than {min_points} clocks", 0
            ) + len(g)
            continue
        frames.append(
            pd.DataFrame(
                {
                    "curve": f"{src}|{dev}|{wl}",
                    "source": str(src),
                    "device": d.name,
                    "workload": str(wl),
                    "kernel": str(wl).split("@")[0],
                    "f": g["value"].to_numpy(float),
                    "t": g["time_s"].to_numpy(float),
                    "p": g["power_w"].to_numpy(float),
                    "dram": g["dram_active"].to_numpy(float),
                    "mem_ratio": g["mem_clock_mhz"].to_numpy(float) / NOMINAL_MEMORY_CLOCK_MHZ.get(d.name, np.nan),
                    # FP32 balance for every sweep (also Perseus' bf16 stages), as `at_clock` uses for an op
                    "balance": d.ridge_point,
                    "bw_per_sm": [
                        knee_bandwidth_per_sm(d, r)
                        for r in g["mem_clock_mhz"].to_numpy(float) / NOMINAL_MEMORY_CLOCK_MHZ.get(d.name, np.nan)
                    ],
                }
            )
        )
    if not frames:
        raise OpcostError("the sweeps table holds no core-clock curve of a known device to fit the clock model on")
    pts = pd.concat(frames, ignore_index=True)
    unreached = unreached_settings(pts)
    if unreached.any():
        skipped[UNREACHED_REASON] = skipped.get(UNREACHED_REASON, 0) + int(unreached.sum())
        pts = pts[~unreached].reset_index(drop=True)
    pts["e"] = pts["t"] * pts["p"]
    ref = pts.loc[pts.groupby("curve")["f"].idxmax(), ["curve", "f", "t", "p"]]
    ref = ref.rename(columns={"f": "f_ref", "t": "t_ref", "p": "p_ref"})
    pts = pts.merge(ref, on="curve", how="left")
    pts["tdp"] = pts["device"].map({k: v.tdp_w for k, v in DEVICES.items()}).astype(float)
    pts["f_base"] = pts["device"].map({k: v.base_clock_mhz for k, v in DEVICES.items()}).astype(float)
    pts["f_boost"] = pts["device"].map({k: v.boost_clock_mhz for k, v in DEVICES.items()}).astype(float)
    pts["is_ref"] = pts["f"] == pts["f_ref"]
    pts["share"], pts["share_kind"] = observed_share(pts)
    return pts.drop(columns=["dram"]), skipped


UNREACHED_JUMP = 1.25  # median (f t) / (f' t') over a device's curves above which a clock setting was not reached
UNREACHED_REASON = "clock setting not reached (time grew faster than 1/f against the next higher clock)"


def unreached_settings(pts: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Points of clock settings the GPU did not run at (a rule on the physics, stated before any score and applied
    to every GPU): with only the core clock changing, time is compute-bound part / f + memory-bound rest, so f t
    never rises when the clock falls. Per curve, each point's f t against the curve's next higher clock; a
    setting (source, device, clock) whose median of that over the device's curves exceeds UNREACHED_JUMP ran
    slower than the requested clock allows on most kernels at once (e.g. the V100 sweep's lowest clock, 405 MHz:
    median 1.35, 1.8-2.1 on its compute-bound kernels, i.e. about half the requested clock; every other
    setting of every sweep GPU is at most 1.17). Those points' clock is unknown: not fitted, not scored. The
    highest clock of a curve (its reference) has no higher neighbour and is never flagged."""
    order = pts.sort_values(["curve", "f"])
    ft = order["f"] * order["t"]
    jump = ft / ft.groupby(order["curve"]).shift(-1)
    med = jump.groupby([order["source"], order["device"], order["f"]]).transform("median")
    unreached: npt.NDArray[np.bool_] = (med > UNREACHED_JUMP).reindex(pts.index).fillna(False).to_numpy(bool)
    return unreached  # typed here: pandas has no type information


def observed_share(pts: pd.DataFrame) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.object_]]:
    """Each curve's compute-bound share from its reference point alone, where the data allow it (NaN
    elsewhere: the model's P_ref / TDP share applies): 1 - DCGM DRAM activity (NV-DVFS kernels, kind
    SHARE_DRAM), or `memory_share` of the transformer layer's bytes (Perseus stages, shapes assumed in
    model/clocks/xpower.py, kind SHARE_BYTES). Returns the shares and their kinds ("" where none)."""
    from opcost.model.clocks.xpower import PERSEUS_MODELS, perseus_flops_bytes

    ref = pts[pts["f"] == pts["f_ref"]].drop_duplicates("curve").set_index("curve")
    share = pd.Series(np.nan, index=ref.index)
    kind = pd.Series("", index=ref.index, dtype=object)
    share[ref["dram"].notna()] = 1.0 - ref["dram"][ref["dram"].notna()].clip(0, 1)
    kind[ref["dram"].notna()] = SHARE_DRAM
    for curve, r in ref.iterrows():
        if r["source"] == "perseus-stage-profiles" and str(r["workload"]).split("/")[0] in PERSEUS_MODELS:
            _, nbytes = perseus_flops_bytes(str(r["workload"]))
            share[curve] = float(memory_share(nbytes, DEVICES[r["device"]].bandwidth, r["t"]))
            kind[curve] = SHARE_BYTES
    return pts["curve"].map(share).to_numpy(float), pts["curve"].map(kind).to_numpy(object)


SHARE_BYTES, SHARE_DRAM = "bytes", "dram"  # how an observed share was obtained (`observed_share`)
KERNEL_SOURCE = "gpu-frequency-dvfs"  # the sweep whose kernels' FLOPs and bytes data/clock_kernels.csv lists


def explained_fraction(
    flops: Floats,
    nbytes: Floats,
    peak: Floats,
    bandwidth: Floats,
    t: Floats,
) -> npt.NDArray[np.float64]:
    """The part of a measured time t the roofline accounts for: min(1, (FLOPs / peak + bytes / bandwidth) / t).
    A kernel far from both roofs (a few thousand threads waiting on DRAM latency, uncoalesced or cache-bound
    access: PolyBench's matrix-vector kernels reach 55-100 of 912 GB/s) spends the rest of its time on something
    its FLOPs and bytes do not describe; that rest takes the share a prediction without them would use
    (`ClockModel.predict` with `share_weight`)."""
    tr = np.maximum(np.asarray(flops, np.float64), 0.0) / np.asarray(peak, np.float64)
    tr = tr + np.maximum(np.asarray(nbytes, np.float64), 0.0) / np.asarray(bandwidth, np.float64)
    return np.clip(tr / np.maximum(np.asarray(t, np.float64), 1e-30), 0.0, 1.0)


def kernel_shares(
    pts: pd.DataFrame, table: dict[str, tuple[float, float]] | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per point of `pts` (`sweep_curves`): the roofline share of its curve's kernel where data/clock_kernels.csv
    (or `table`) gives the kernel's FLOPs and bytes (NaN elsewhere), and the part of the reference time that share
    speaks for (`explained_fraction`; NaN elsewhere). Both at the curve's reference point, by the path network ops
    take (`roofline_share`, `ClockModel.at_clock`): the device's FP32 peak at the reference clock (peak x f_ref /
    f_boost) against its bandwidth at the curve's memory clock (bandwidth x mem_ratio; NaN: nominal). Nothing from
    the curve's other points; FLOPs and bytes are properties of the code, so a held-out GPU may use them."""
    from opcost.data.clock_kernels import clock_kernels

    work = clock_kernels() if table is None else table
    share = np.full(len(pts), np.nan)
    weight = np.full(len(pts), np.nan)
    known = (pts["source"] == KERNEL_SOURCE).to_numpy(bool) & pts["kernel"].isin(list(work)).to_numpy(bool)
    if known.any():
        k = pts.loc[known]
        fb = np.array([work[name] for name in k["kernel"]], float).reshape(-1, 2)
        dev = [DEVICES[d] for d in k["device"]]
        peak = np.array([d.fp32_flops for d in dev]) * k["f_ref"].to_numpy(float) / k["f_boost"].to_numpy(float)
        r = k["mem_ratio"].to_numpy(float)
        bw = np.array([d.bandwidth for d in dev]) * np.where(np.isfinite(r) & (r > 0), r, 1.0)
        share[known] = [roofline_share(f, b, pk, w) for (f, b), pk, w in zip(fb, peak, bw)]
        weight[known] = explained_fraction(fb[:, 0], fb[:, 1], peak, bw, k["t_ref"].to_numpy(float))
    return share, weight


SHARE_SCALE_RANGE = (0.2, 3.0)  # bounds of the fitted share scales (ClockModel.share_scale_*)


# -- fitting ----------------------------------------------------------------------------------
def point_weights(pts: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Each device weighs the same; within it each curve the same; within a curve each point."""
    per_curve = pts.groupby("curve")["f"].transform("size")
    curves_per_dev = pts.groupby("device")["curve"].transform("nunique")
    weights: npt.NDArray[np.float64] = (1.0 / (per_curve * curves_per_dev)).to_numpy(float)
    return weights  # typed here: pandas has no type information


STATIC_MAX = 0.95  # the static fraction never reaches the whole reference power (something follows the clock)
STATIC_MEM_MAX = 0.9  # bound of the fitted static_mem
BALANCE_COEF_MAX = 5.0  # bound of |share_balance| (per unit of log machine balance)
KNEE_Q_RANGE = (2.0, 100.0)  # bounds of the fitted knee_q (bytes per SM per cycle)
KNEE_Q_START = 10.0
DVFS_GAMMA = 3.0  # dynamic power ~ f V^2: the exponent of V is 2 (gamma - 1), physics, not fitted
# The voltage floor relative to the boost voltage: NVIDIA's V/F tables start near 0.7 V and end near 1.05-1.1 V, a
# ratio of about 0.65; below 0.5 no board goes. Fits on one GPU's kernels had a second, unphysical basin near 0.36
# (static share ~0.41) whose flat valley the solver crawled without settling (docs/clocks.md).
VOLT_MIN_RANGE = (0.5, 1.0)
VOLT_MIN_STARTS = (0.5, 0.7, 0.9)  # starts of the power fit's voltage floor (relative to the boost voltage)


def fit(pts: pd.DataFrame) -> ClockModel:
    """Least-squares fit of the global parameters on the non-reference points of `pts` (relative errors):
    the time parameters first (two steps, below), then the power's static fractions and DVFS voltage curve
    (gamma fixed)."""
    from opcost.model.basis.lsq import least_squares

    train = pts[~pts["is_ref"]]
    if train.empty:
        raise OpcostError("no off-reference points to fit the clock model on")
    w = np.sqrt(point_weights(train))
    t: npt.NDArray[np.float64] = train["t"].to_numpy(float)  # typed here: pandas has no type information
    p: npt.NDArray[np.float64] = train["p"].to_numpy(float)
    probe = ClockModel()
    # The fallback share sigmoid(a + b P_ref / TDP) serves every curve without an observed share (the RTX
    # 3080 Ti's, an op without FLOPs and bytes). Fitted only on curves that have none, it would stay at its
    # starting point (sigmoid(0) = 0.5) whenever every training curve has an observed share (leave the
    # RTX 3080 Ti out): so the time fit also scores every observed-share curve with its share hidden.
    known = np.isfinite(train["share"].to_numpy(float)) if "share" in train else np.zeros(len(train), bool)
    hidden = train[known].assign(share=np.nan)
    w_hidden, t_hidden = w[known], t[known]

    # Two steps, so that the curves without an observed share (all on one GPU, the RTX 3080 Ti's) cannot pull the
    # parameters the observed-share curves determine (the share scales), and so
    # the held-out A100's time when the 3080 Ti trains: (1) the share scales on the curves with an
    # observed share; (2) the fallback share (a, b, balance) on the curves without one and on every
    # observed-share curve with its share hidden, step 1's values fixed. A capped reference's clock is not fitted
    # (CAP_K: the base clock), and the time steps score it at that hard cap (docs/clocks.md); the power step
    # and every prediction use the soft cap.
    s_lo, s_hi = SHARE_SCALE_RANGE
    # a share scale is fitted only where a training curve's share was obtained its way: one no curve uses has
    # no gradient and would keep whichever start won on the others (an arbitrary value in the model)
    kinds = set(train.loc[known, "share_kind"]) if "share_kind" in train else set()
    scales: tuple[str, ...] = tuple(f"share_scale_{k}" for k in (SHARE_BYTES, SHARE_DRAM) if k in kinds)
    step1 = scales
    # The balance term has evidence only where the machine balance varies (several GPUs): on one GPU it is a
    # constant that moves with share_a along a flat line, so it keeps its start (zero) there.
    step2: tuple[str, ...] = ("share_a", "share_b", "share_balance")
    if "balance" not in train or np.ptp(np.log(train["balance"].to_numpy(float))) == 0:
        step2 = step2[:2]
    # the memory-path knee's q: fitted with the share scales where an observed-share curve has a knee (pre-Ampere)
    if step1 and "bw_per_sm" in train and np.isfinite(train.loc[known, "bw_per_sm"].to_numpy(float)).any():
        step1 = step1 + ("knee_q",)
    probe.cap_k = CAP_K
    box = {"share_a": (-20, 20, 0.0), "share_b": (-20, 20, 0.0),
           "share_balance": (-BALANCE_COEF_MAX, BALANCE_COEF_MAX, 0.0),
           "share_scale_bytes": (s_lo, s_hi, 1.0), "share_scale_dram": (s_lo, s_hi, 1.0),
           "knee_q": (*KNEE_Q_RANGE, KNEE_Q_START)}  # fmt: skip

    def solve(
        names: tuple[str, ...],
        rows: pd.DataFrame,
        w_rows: npt.NDArray[np.float64],
        t_rows: npt.NDArray[np.float64],
        starts: tuple[list[float], ...],
    ) -> None:
        """Least squares of the relative time errors of `rows` over the parameters `names` (set on `probe`)."""

        def res(q: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            for k, v in zip(names, q):
                setattr(probe, k, float(v))
            return w_rows * (_predict(probe, rows, soft_cap=False)[0] / t_rows - 1.0)

        bounds = ([box[k][0] for k in names], [box[k][1] for k in names])
        for k, v in zip(names, least_squares(res, starts, bounds)):
            setattr(probe, k, float(v))

    if step1:
        # Where scaled shares clip at 1 the scale has no gradient: so two starts, the better kept.
        starts = tuple([x] * len(scales) + [KNEE_Q_START] * (len(step1) - len(scales)) for x in (1.0, 0.5))
        solve(step1, train[known], w[known], t[known], starts)
    rows2 = pd.concat([train[~known], hidden], ignore_index=True)
    w2, t2 = np.concatenate([w[~known], w_hidden]), np.concatenate([t[~known], t_hidden])
    solve(step2, rows2, w2, t2, ([box[k][2] for k in step2],))

    probe.gamma = DVFS_GAMMA

    def power_res(q: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        probe.static_frac, probe.volt_slope, probe.volt_min, probe.static_mem = (float(v) for v in q)
        return w * (_predict(probe, train)[1] / p - 1.0)

    bounds = ([0.0, 0.0, VOLT_MIN_RANGE[0], 0.0], [0.95, 5.0, VOLT_MIN_RANGE[1], STATIC_MEM_MAX])
    # The voltage floor makes the power fit non-convex (a floor below every point's clock has no gradient):
    # one start per floor in VOLT_MIN_STARTS, the lowest cost kept.
    pq = least_squares(power_res, [[0.3, 1.0, v, 0.05] for v in VOLT_MIN_STARTS], bounds)
    return ClockModel(
        share_a=probe.share_a,
        share_b=probe.share_b,
        cap_k=probe.cap_k,
        share_scale_bytes=probe.share_scale_bytes,
        share_scale_dram=probe.share_scale_dram,
        share_balance=probe.share_balance,
        knee_q=probe.knee_q,
        static_frac=float(pq[0]),
        static_mem=float(pq[3]),
        gamma=DVFS_GAMMA,
        volt_slope=float(pq[1]),
        volt_min=float(pq[2]),
        trained_on=sorted(set(pts["device"])),
        n_curves=int(pts["curve"].nunique()),
        n_points=int(len(pts)),
    )


def _predict(
    model: ClockModel, pts: pd.DataFrame, soft_cap: bool = True
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    share = pts["share"].to_numpy(float) if "share" in pts else None
    if share is not None and "share_kind" in pts:
        kind = pts["share_kind"].to_numpy(object)
        share = share * np.where(kind == SHARE_DRAM, model.share_scale_dram, model.share_scale_bytes)
    f_base = pts["f_base"].to_numpy(float) if "f_base" in pts else None
    f_boost = pts["f_boost"].to_numpy(float) if "f_boost" in pts else None
    balance = pts["balance"].to_numpy(float) if "balance" in pts else None
    mem_ratio = pts["mem_ratio"].to_numpy(float) if "mem_ratio" in pts else None
    return model.predict(
        pts["f"].to_numpy(float), pts["f_ref"].to_numpy(float), pts["t_ref"].to_numpy(float),
        pts["p_ref"].to_numpy(float), pts["tdp"].to_numpy(float), share, f_base, f_boost, balance, mem_ratio,
        soft_cap, pts["bw_per_sm"].to_numpy(float) if "bw_per_sm" in pts else None,
        pts["share_weight"].to_numpy(float) if "share_weight" in pts else None,
    )  # fmt: skip


def predict_points(model: ClockModel, pts: pd.DataFrame) -> pd.DataFrame:
    """`pts` with predicted t_hat, p_hat, e_hat from each curve's reference point only (its clock, time,
    power, observed share where known, the device's base clock and TDP)."""
    t, p, e = _predict(model, pts)
    return pts.assign(t_hat=t, p_hat=p, e_hat=e)
