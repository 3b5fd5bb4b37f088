"""Validation of the clock model that cannot flatter.

- Leave-one-GPU-out: the model is fitted on every other GPU's curves; each of the held-out GPU's
  curves is predicted from its reference (highest-clock) point only.
- Leave-one-kernel-out within a GPU: fitted on the GPU's other kernels (a kernel's curves at every
  memory clock leave together), predicted from the held-out kernel's reference point.
The reference point itself is never scored (it is the input). Per GPU x source: time, power and
energy MAPE and median APE over the off-reference clocks, and the extra energy (EDP) paid at the
clock the model calls energy-optimal (EDP-optimal) among the measured clocks, relative to the
measured optimum, in %.

The alternative learner (`TreeClock`): gradient-boosted trees on log(f / f_ref), P_ref / TDP and
TDP predicting log(t / t_ref) (monotone non-increasing in the clock) and log(P / P_ref) (monotone
non-decreasing), each minus its own prediction at f_ref so the reference is met exactly. It runs
under the same leave-one-GPU-out split so the two can be compared (model/clocks/clock.py says which ships).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from opcost.model.clocks.clock import ClockModel, fit, point_weights, predict_points

Predictor = Callable[[pd.DataFrame], pd.DataFrame]  # points of held-out curves -> with t_hat, p_hat, e_hat


@dataclass
class TreeClock:
    """The alternative learner (module docstring)."""

    seed: int = 0
    max_iter: int = 100
    learning_rate: float = 0.05

    def _x(self, pts: pd.DataFrame) -> np.ndarray:
        return np.column_stack([np.log(pts["f"] / pts["f_ref"]), pts["p_ref"] / pts["tdp"], pts["tdp"]])

    def fit(self, pts: pd.DataFrame) -> "TreeClock":
        from sklearn.ensemble import HistGradientBoostingRegressor

        train = pts[~pts["is_ref"]]
        x, w = self._x(train), point_weights(train)
        kw = {"max_iter": self.max_iter, "learning_rate": self.learning_rate, "random_state": self.seed}
        self.time_ = HistGradientBoostingRegressor(monotonic_cst=[-1, 0, 0], **kw).fit(
            x, np.log(train["t"] / train["t_ref"]), sample_weight=w
        )
        self.power_ = HistGradientBoostingRegressor(monotonic_cst=[1, 0, 0], **kw).fit(
            x, np.log(train["p"] / train["p_ref"]), sample_weight=w
        )
        return self

    def predict(self, pts: pd.DataFrame) -> pd.DataFrame:
        x = self._x(pts)
        x0 = x.copy()
        x0[:, 0] = 0.0
        t = pts["t_ref"] * np.exp(self.time_.predict(x) - self.time_.predict(x0))
        p = pts["p_ref"] * np.exp(self.power_.predict(x) - self.power_.predict(x0))
        return pts.assign(t_hat=t.to_numpy(), p_hat=p.to_numpy(), e_hat=(t * p).to_numpy())


def physical(pts: pd.DataFrame) -> tuple[ClockModel, Predictor]:
    model = fit(pts)
    return model, lambda held: predict_points(model, held)


BLEND_STEP = 0.05  # the simplex grid the stacking weights are chosen on


def simplex(k: int, step: float = BLEND_STEP) -> np.ndarray:
    """Every weight vector of length k with entries on a `step` grid, non-negative, summing to 1 (rows)."""
    n = int(round(1 / step))
    rows = [c for c in np.ndindex(*(n + 1,) * (k - 1)) if sum(c) <= n]
    return np.array([[*c, n - sum(c)] for c in rows], float) / n


def choose_blend(parts: list[dict[str, np.ndarray]]) -> tuple[list[float], list[float]]:
    """Stacking weights from held-out predictions: `parts` holds, per (inner) held-out GPU, the measured
    off-reference `t`, `p` and the candidates' `t_parts` (4 x n: physical, then the time guesses) and
    `p_parts` (3 x n: physical, then the power guesses). Time weights minimise the mean over GPUs of the
    time MAPE; power weights then minimise the mean over GPUs of the energy MAPE (time at its blend).
    Each GPU weighs the same, as in the fit. Ties go to the first such grid row."""
    wt_grid, wp_grid = simplex(4), simplex(3)
    t_score = np.mean([np.abs(wt_grid @ q["t_parts"] / q["t"] - 1).mean(axis=1) for q in parts], axis=0)
    wt = wt_grid[int(np.argmin(t_score))]
    e_score = np.mean(
        [np.abs((wt @ q["t_parts"]) * (wp_grid @ q["p_parts"]) / (q["t"] * q["p"]) - 1).mean(axis=1) for q in parts],
        axis=0,
    )
    wp = wp_grid[int(np.argmin(e_score))]
    return [float(x) for x in wt], [float(x) for x in wp]


def stacked(pts: pd.DataFrame, fitter: Callable[[pd.DataFrame], ClockModel] = fit) -> tuple[ClockModel, Predictor]:
    """The physical form blended with the zero-parameter guesses (ClockModel.time_blend / power_blend), the
    weights chosen by an inner leave-one-GPU-out on the GPUs of `pts` only: each of them predicted by a
    physical fit on the others, every candidate scored on its off-reference points (`choose_blend`).
    With a single GPU there is nothing to choose on: the physical form alone. `fitter` is the physical
    fit (tests pass a spy)."""
    from opcost.model.clocks.clock import guess_values

    devices = sorted(set(pts["device"]))
    parts = []
    for dev in devices if len(devices) > 1 else []:
        inner = fitter(pts[pts["device"] != dev])
        held = pts[(pts["device"] == dev) & ~pts["is_ref"]]
        ph = predict_points(inner, held)
        tg, pg = guess_values(held["f"], held["f_ref"], held["t_ref"], held["p_ref"])
        parts.append(
            {
                "t": held["t"].to_numpy(float),
                "p": held["p"].to_numpy(float),
                "t_parts": np.vstack([ph["t_hat"].to_numpy(float), *tg]),
                "p_parts": np.vstack([ph["p_hat"].to_numpy(float), *pg]),
            }
        )
    model = fitter(pts)
    if parts:
        model.time_blend, model.power_blend = choose_blend(parts)
    return model, lambda held: predict_points(model, held)


def trees(pts: pd.DataFrame, seed: int = 0, max_iter: int = 100) -> tuple[TreeClock, Predictor]:
    model = TreeClock(seed=seed, max_iter=max_iter).fit(pts)
    return model, model.predict


def leave_one_gpu_out(
    pts: pd.DataFrame, learner: Callable[[pd.DataFrame], tuple[Any, Predictor]] = physical
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Every GPU's points predicted by a model fitted on the other GPUs only. Returns the predicted
    points and, per held-out GPU, the devices the fit saw (what tests check the split on)."""
    out, seen = [], {}
    for dev in sorted(set(pts["device"])):
        train, held = pts[pts["device"] != dev], pts[pts["device"] == dev]
        if train.empty:
            continue
        _, predict = learner(train)
        seen[dev] = sorted(set(train["device"]))
        out.append(predict(held))
    return pd.concat(out, ignore_index=True), seen


def leave_one_kernel_out(
    pts: pd.DataFrame, learner: Callable[[pd.DataFrame], tuple[Any, Predictor]] = physical
) -> pd.DataFrame:
    """Within each GPU, every kernel predicted by a model fitted on that GPU's other kernels."""
    out = []
    for _, g in pts.groupby("device"):
        for kernel in sorted(set(g["kernel"])):
            train, held = g[g["kernel"] != kernel], g[g["kernel"] == kernel]
            if train["kernel"].nunique() < 2:
                continue
            _, predict = learner(train)
            out.append(predict(held))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def curve_scores(pred: pd.DataFrame) -> pd.DataFrame:
    """Per curve: APEs over off-reference clocks and extra energy/EDP at the predicted optimum (%)."""
    rows = []
    for curve, g in pred.groupby("curve", sort=True):
        off = g[~g["is_ref"]]
        edp, edp_hat = g["e"] * g["t"], g["e_hat"] * g["t_hat"]
        i_e, i_edp = int(np.argmin(g["e_hat"].to_numpy())), int(np.argmin(edp_hat.to_numpy()))
        rows.append(
            {
                "curve": curve,
                "source": g["source"].iloc[0],
                "device": g["device"].iloc[0],
                "kernel": g["kernel"].iloc[0],
                "n": int(len(off)),
                "time_ape": list(100 * (off["t_hat"] / off["t"] - 1).abs()),
                "power_ape": list(100 * (off["p_hat"] / off["p"] - 1).abs()),
                "energy_ape": list(100 * (off["e_hat"] / off["e"] - 1).abs()),
                "f_energy_opt": float(g["f"].iloc[int(np.argmin(g["e"].to_numpy()))]),
                "f_energy_opt_hat": float(g["f"].iloc[i_e]),
                "extra_energy_pct": float(100 * (g["e"].iloc[i_e] / g["e"].min() - 1)),
                "f_edp_opt": float(g["f"].iloc[int(np.argmin(edp.to_numpy()))]),
                "f_edp_opt_hat": float(g["f"].iloc[i_edp]),
                "extra_edp_pct": float(100 * (edp.iloc[i_edp] / edp.min() - 1)),
            }
        )
    return pd.DataFrame(rows)


def summarise(curves: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: pooled MAPE and median APE of time, power, energy (%), mean and max extra energy/EDP."""
    rows = []
    for key, g in curves.groupby(by, sort=True):
        row: dict[str, Any] = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row.update(curves=int(len(g)), points=int(g["n"].sum()))
        for q in ("time", "power", "energy"):
            ape = np.concatenate([np.asarray(a, float) for a in g[f"{q}_ape"]])
            row[f"{q}_mape"] = float(ape.mean()) if len(ape) else float("nan")
            row[f"{q}_mdape"] = float(np.median(ape)) if len(ape) else float("nan")
        for q in ("energy", "edp"):
            row[f"extra_{q}_mean"] = float(g[f"extra_{q}_pct"].mean())
            row[f"extra_{q}_max"] = float(g[f"extra_{q}_pct"].max())
        rows.append(row)
    return pd.DataFrame(rows)


RATIO_BINS = (0.3, 0.5, 0.7, 0.85, 1.0)  # upper edges of f / f_ref bins for the error by clock distance


def error_by_ratio(pred: pd.DataFrame) -> list[list[float]]:
    """[[upper f/f_ref, time MAPE, energy MAPE], ...] (fractions) over off-reference points, pooled over
    GPUs; an empty bin takes the next lower-ratio bin's (wider) error."""
    off = pred[~pred["is_ref"]]
    ratio = (off["f"] / off["f_ref"]).to_numpy(float)
    t_ape = (off["t_hat"] / off["t"] - 1).abs().to_numpy(float)
    e_ape = (off["e_hat"] / off["e"] - 1).abs().to_numpy(float)
    out, lo, prev = [], 0.0, [float(t_ape.mean()), float(e_ape.mean())]
    for hi in RATIO_BINS:
        m = (ratio > lo) & (ratio <= hi)
        prev = [float(t_ape[m].mean()), float(e_ape[m].mean())] if m.any() else prev
        out.append([hi, *prev])
        lo = hi
    return out


def pooled_error(curves: pd.DataFrame) -> dict[str, float]:
    """Relative errors (fractions) pooled over every GPU's points: what predictions widen intervals by."""
    out = {}
    for q in ("time", "power", "energy"):
        ape = np.concatenate([np.asarray(a, float) for a in curves[f"{q}_ape"]])
        out[q] = float(ape.mean() / 100)
    return out


# -- zero-parameter guesses: the bar the fitted model must clear on every GPU (docs/clocks.md) -------
TIME_GUESSES = {"compute": 1.0, "half": 0.5, "memory": 0.0}  # compute-bound share s: t = t_ref (1 + s (f_ref/f - 1))
POWER_GUESSES = {"prop_f": 1.0, "const": 0.0}  # P = P_ref (f / f_ref)^k


def guess(share: float, power_exp: float) -> Predictor:
    """A guess that fits nothing: time with compute-bound share `share`, power ~ f^power_exp, from the
    curve's reference point only."""

    def predict(held: pd.DataFrame) -> pd.DataFrame:
        from opcost.model.clocks.clock import time_ratio

        x = (held["f"] / held["f_ref"]).to_numpy(float)
        t = held["t_ref"].to_numpy(float) * time_ratio(held["f"].to_numpy(float), held["f_ref"].to_numpy(float), share)
        p = held["p_ref"].to_numpy(float) * x**power_exp
        return held.assign(t_hat=t, p_hat=p, e_hat=t * p)

    return predict


def guess_scores(pts: pd.DataFrame) -> pd.DataFrame:
    """Every guess's per-GPU scores (the same columns as `summarise`, `learner` = guess:<time>/<power>)."""
    out = []
    for tn, s in TIME_GUESSES.items():
        for pn, k in POWER_GUESSES.items():
            pred = guess(s, k)(pts)
            out.append(summarise(curve_scores(pred), ["device", "source"]).assign(learner=f"guess:{tn}/{pn}"))
    return pd.concat(out, ignore_index=True)


def beats_guesses(model: pd.DataFrame, guesses: pd.DataFrame, qs: tuple[str, ...] = ("time_mape", "energy_mape")):
    """Per device x source: the model's figure, the best guess's figure and its name, and whether the model
    is strictly better, for each of `qs`."""
    rows = []
    for r in model.itertuples():
        g = guesses[(guesses["device"] == r.device) & (guesses["source"] == r.source)]
        row: dict[str, Any] = {"device": r.device, "source": r.source}
        for q in qs:
            best = g.loc[g[q].idxmin()]
            row.update({q: float(getattr(r, q)), f"best_guess_{q}": float(best[q])})
            row[f"best_guess_{q}_by"] = best["learner"]
            row[f"beats_{q}"] = bool(getattr(r, q) < best[q])
        rows.append(row)
    return pd.DataFrame(rows)


def path_validation(pts: pd.DataFrame, fitter: Callable[[pd.DataFrame], ClockModel] = fit) -> pd.DataFrame:
    """The path network predictions take, on the sweeps whose FLOPs and bytes are known
    (Perseus transformer stages; shapes assumed in model/clocks/xpower.py). Leave-one-GPU-out (the model fitted on
    the other GPUs), each held-out curve predicted with its compute-bound share from (a) the roofline split
    I / (I + ridge) at the bf16 peak, (b) 1 - the DRAM's busy share of the reference time (`memory_share`),
    (c) no FLOPs or bytes at all (the model's P_ref / TDP share). Per GPU: `summarise` columns + `share_path`.
    Then the GPU-FREQUENCY-DVFS kernels of known FLOPs and bytes (`kernel_path_validation`). `fitter`: the
    physical fit (tests pass a spy)."""
    from opcost.devices import DEVICES
    from opcost.model.clocks.clock import memory_share, roofline_share
    from opcost.model.clocks.xpower import PERSEUS_MODELS, perseus_flops_bytes

    perseus = pts["source"] == "perseus-stage-profiles"
    known = pts[perseus & pts["workload"].str.split("/").str[0].isin(PERSEUS_MODELS)]
    out = []
    for dev in sorted(set(known["device"])):
        model = fitter(pts[pts["device"] != dev])
        held = known[known["device"] == dev]
        d = DEVICES[dev]
        fb = [perseus_flops_bytes(w) for w in held["workload"]]
        shares = {
            "roofline I/(I+ridge)": [roofline_share(f, b, d.fp16_flops, d.bandwidth) for f, b in fb],
            "1 - memory busy": list(memory_share(np.array([b for _, b in fb]), d.bandwidth, held["t_ref"])),
            "P_ref/TDP (no FLOPs)": [np.nan] * len(held),
        }
        for name, s in shares.items():
            pred = predict_points(model, held.assign(share=np.asarray(s, float)))
            out.append(summarise(curve_scores(pred), ["device", "source"]).assign(share_path=name))
    out.extend(kernel_path_validation(pts, fitter))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


KERNEL_PATHS = ("roofline I/(I+ridge)", "roofline, rest P_ref/TDP", "P_ref/TDP (no FLOPs)")


def kernel_path_validation(pts: pd.DataFrame, fitter: Callable[[pd.DataFrame], ClockModel] = fit) -> list[pd.DataFrame]:
    """The same for the GPU-FREQUENCY-DVFS kernels (RTX 3080 Ti), whose FLOPs and bytes data/clock_kernels.csv
    gives where the problem size is known (`clock.kernel_shares`). Leave-one-GPU-out, every curve of the held-out
    GPU (kernels without FLOPs and bytes keep the P_ref / TDP share in every path, so the figures compare with
    the GPU's logo.csv row) predicted with its share from (a) the roofline split alone, the path network ops take
    (`ClockModel.at_clock`), (b) the roofline split for the part of the reference time the roofline accounts for
    and the P_ref / TDP share for the rest (`clock.explained_fraction`), (c) P_ref / TDP alone. Nothing is fitted
    on the held-out GPU. Per GPU: `summarise` columns + `share_path` + `curves_with_flops`."""
    from opcost.model.clocks.clock import KERNEL_SOURCE, kernel_shares

    out = []
    for dev in sorted(set(pts.loc[pts["source"] == KERNEL_SOURCE, "device"])):
        held = pts[(pts["device"] == dev) & (pts["source"] == KERNEL_SOURCE)]
        share, weight = kernel_shares(held)
        if not np.isfinite(share).any():
            continue
        model = fitter(pts[pts["device"] != dev])
        n_known = int(held.loc[np.isfinite(share), "curve"].nunique())
        paths = {
            KERNEL_PATHS[0]: (share, np.ones(len(held))),
            KERNEL_PATHS[1]: (share, weight),
            KERNEL_PATHS[2]: (np.full(len(held), np.nan), np.ones(len(held))),
        }
        for name, (s, w) in paths.items():
            pred = predict_points(model, held.assign(share=s, share_kind="", share_weight=w))
            table = summarise(curve_scores(pred), ["device", "source"])
            out.append(table.assign(share_path=name, curves_with_flops=n_known))
    return out


SHARE_GRID = np.linspace(0.0, 1.0, 201)  # the compute-bound shares `share_bounds` searches (step 0.005)


def share_bounds(pts: pd.DataFrame) -> pd.DataFrame:
    """How far any share-based time prediction could get, chosen in hindsight on the scored points themselves
    (a bound, not a model; nothing here is fitted for prediction): per GPU x source, the time MAPE of (a) the
    best single compute-bound share for all of the GPU's curves (what a model that knows the device but nothing
    per kernel can at best reach) and (b) the best share per curve (what per-kernel FLOPs and bytes, or
    counters, could at best add), both in the form t = t_ref (1 + s (f_ref / f - 1)) from each curve's
    reference, over its off-reference clocks. A GPU whose (a) is above the goal cannot meet it without
    per-kernel information, whatever the device-level terms."""
    from opcost.model.clocks.clock import time_ratio

    off = pts[~pts["is_ref"]]
    ratio = (off["f_ref"] / off["f"]).to_numpy(float)
    rel = (off["t_ref"] / off["t"]).to_numpy(float)
    # APE of every grid share at every point: |rel (1 + s (ratio - 1)) - 1|, points x shares
    ape = np.abs(rel[:, None] * time_ratio(1.0, ratio[:, None], SHARE_GRID[None, :]) - 1.0)
    rows = []
    for (dev, src), idx in off.groupby(["device", "source"], sort=True).indices.items():
        a = ape[idx]
        k = int(np.argmin(a.mean(axis=0)))
        per_curve = [ape[idx][j].mean(axis=0).min() * len(j) for j in off.iloc[idx].groupby("curve").indices.values()]
        rows.append({"device": dev, "source": src, "best_device_share": float(SHARE_GRID[k]),
                     "best_device_share_time_mape": float(100 * a[:, k].mean()),
                     "best_curve_share_time_mape": float(100 * sum(per_curve) / len(idx))})  # fmt: skip
    return pd.DataFrame(rows)


def model_share(model: ClockModel, refs: pd.DataFrame) -> np.ndarray:
    """The compute-bound share the model's time law uses for each curve (one reference row each), as
    `clock._predict` forms it: the observed share times its estimator's fitted scale where a curve has one,
    else the fallback sigmoid at the curve's memory clock (`ClockModel.share_from_power`) and reference clock
    (`clock.reference_clock_share`, where `refs` has f_boost); clipped to [0, 1]."""
    from opcost.model.clocks.clock import SHARE_DRAM, reference_clock_share

    fallback = model.share_from_power(refs["p_ref"], refs["tdp"], refs["balance"], refs["mem_ratio"])
    if "f_boost" in refs:
        fallback = reference_clock_share(fallback, refs["f_ref"], refs["f_boost"])
    obs = refs["share"].to_numpy(float)
    scale = np.where(refs["share_kind"].to_numpy(object) == SHARE_DRAM, model.share_scale_dram, model.share_scale_bytes)
    return np.clip(np.where(np.isfinite(obs), obs * scale, fallback), 0.0, 1.0)


def share_table(pts: pd.DataFrame, fitter: Callable[[pd.DataFrame], ClockModel] = fit) -> pd.DataFrame:
    """Per curve, leave-one-GPU-out: the compute-bound share that fits the curve best in hindsight (SHARE_GRID,
    time MAPE over its off-reference clocks; a bound, not a prediction), the share the model fitted on the other
    GPUs gives it (`model_share`) and its fallback share at the nominal memory clock and the boost clock, beside
    every per-curve feature a prediction has: P_ref / TDP, the memory-clock ratio, the reference time (kernel
    duration at f_ref), the machine balance and the observed share (1 - DRAM activity or 1 - bytes / bandwidth /
    t_ref). What one reads to see which feature could predict the best share on an unseen GPU (docs/clocks.md,
    "Guesses to beat, and the best share in hindsight"). `fitter`: the physical fit (tests pass a spy)."""
    from opcost.model.clocks.clock import time_ratio

    rows = []
    for dev in sorted(set(pts["device"])):
        train, held = pts[pts["device"] != dev], pts[pts["device"] == dev]
        if train.empty:
            continue
        model = fitter(train)
        refs = held[held["is_ref"]].drop_duplicates("curve").set_index("curve", drop=False)
        off = held[~held["is_ref"]]
        ape = np.abs(
            (off["t_ref"] / off["t"]).to_numpy(float)[:, None]
            * time_ratio(1.0, (off["f_ref"] / off["f"]).to_numpy(float)[:, None], SHARE_GRID[None, :])
            - 1.0
        )
        best = {c: ape[i].mean(axis=0) for c, i in off.groupby("curve").indices.items()}
        shares = dict(zip(refs.index, model_share(model, refs)))
        s0 = dict(zip(refs.index, model.share_from_power(refs["p_ref"], refs["tdp"], refs["balance"])))
        for c, a in sorted(best.items()):
            r = refs.loc[c]
            k = int(np.argmin(a))
            rows.append({"device": dev, "source": r["source"], "workload": r["workload"],
                         "best_share": float(SHARE_GRID[k]), "best_share_time_mape": float(100 * a[k]),
                         "model_share": float(shares[c]), "fallback_share_nominal_mem": float(s0[c]),
                         "observed_share": float(r["share"]), "observed_kind": str(r["share_kind"]),
                         "p_ref_over_tdp": float(r["p_ref"] / r["tdp"]), "mem_ratio": float(r["mem_ratio"]),
                         "t_ref_s": float(r["t_ref"]), "balance": float(r["balance"]),
                         "f_min_over_f_ref": float(held.loc[held["curve"] == c, "f"].min() / r["f_ref"])})  # fmt: skip
    return pd.DataFrame(rows)
