"""A new GPU learnt from one measured network: its ops become the GPU's own, and they correct the transfer.

Why: a user who measures one network's ops on a card no model has seen (`opcost visit`) should
get better answers for every other network on it. Two things carry over from the measured ops:
- an op measured there is the GPU's own: another network running the same op (kind, shapes) takes its
  measured time, not the transferred one;
- the transfer's error on that card is systematic per op kind (a kernel library's efficiency, a clock the
  table does not know, the host): per kind, the median log ratio measured / transferred over the measured
  ops, shrunk towards the pooled median of all of them by `SHRINK_OPS` pseudo-ops, and the pooled median
  shrunk towards no correction the same way, corrects every other op of that kind (a kind the network did
  not run takes the shrunk pooled factor).
Medians, not means: a few ops the host bounds or a cache favours must not move a kind's factor.
Judged in `evaluate` (stage train-xdevice): on each GPU with several measured networks, each network in
turn is the measured one and the others are predicted with and without it, by models that never saw that
GPU (leave one GPU out).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from opcost.devices import DeviceConfig

SHRINK_OPS = 30.0  # pseudo-ops of "no extra correction" behind each factor
KEY_COLUMNS = ("xkind", "batch", "m", "n", "k", "flops", "bytes", "numel")  # an op's identity across networks
POOLED = "*"


def kind_factors(xkinds: Any, measured_s: Any, predicted_s: Any, shrink: float = SHRINK_OPS) -> dict[str, float]:
    """Per kind, the multiplicative correction measured / transferred (module docstring), and under
    POOLED the factor for kinds not measured. Rows with a non-positive time are ignored; no rows: {}."""
    xk = np.asarray(xkinds, dtype=object)
    m, p = np.asarray(measured_s, float), np.asarray(predicted_s, float)
    ok = np.isfinite(m) & np.isfinite(p) & (m > 0) & (p > 0)
    if not ok.any():
        return {}
    xk, r = xk[ok], np.log(m[ok] / p[ok])
    pooled = float(np.median(r)) * len(r) / (len(r) + shrink)
    out = {POOLED: float(np.exp(pooled))}
    for k in sorted(set(xk)):
        rk = r[xk == k]
        out[str(k)] = float(np.exp((len(rk) * float(np.median(rk)) + shrink * pooled) / (len(rk) + shrink)))
    return out


def apply_factors(xkinds: Any, t_s: Any, factors: dict[str, float]) -> npt.NDArray[np.float64]:
    """`t_s` with each row's kind factor (the pooled one where its kind has none; unchanged without factors)."""
    t = np.asarray(t_s, np.float64)
    if not factors:
        return t.copy()
    f = np.array([factors.get(str(k), factors[POOLED]) for k in np.asarray(xkinds, dtype=object)], np.float64)
    return t * f


def op_keys(rows: pd.DataFrame) -> pd.Series:
    """One string per row naming its op across networks (KEY_COLUMNS, rounded to 6 significant digits)."""
    parts = [rows["xkind"].astype(str)] + [rows[c].astype(float).map(lambda v: f"{v:.6g}") for c in KEY_COLUMNS[1:]]
    key = parts[0]
    for s in parts[1:]:
        key = key + "|" + s
    return key


def own_times(keys: pd.Series, measured_keys: pd.Series, measured_s: Any) -> npt.NDArray[np.float64]:
    """Per row of `keys`, the measured time of the same op (median over its measurements), NaN where none."""
    table = pd.Series(np.asarray(measured_s, float), index=measured_keys.to_numpy()).groupby(level=0).median()
    own: npt.NDArray[np.float64] = keys.map(table).to_numpy(float)
    return own  # typed here: pandas has no type information


def corrected(rows: pd.DataFrame, t_s: np.ndarray, measured: pd.DataFrame) -> np.ndarray:
    """Transferred op times `t_s` of `rows` after a measured network (`measured`: its op rows with
    `measured_s` and the transfer's `predicted_s`): own ops take their measured time, the rest their kind's
    factor (module docstring)."""
    factors = kind_factors(measured["xkind"], measured["measured_s"], measured["predicted_s"])
    out = apply_factors(rows["xkind"], t_s, factors)
    own = (
        own_times(op_keys(rows), op_keys(measured), measured["measured_s"])
        if len(measured)
        else np.full(len(rows), np.nan)
    )
    hit = np.isfinite(own) & (own > 0)
    out[hit] = own[hit]
    return out


# -- validation -----------------------------------------------------------------------------------------
def op_measurements(gpu: str, nets: pd.DataFrame, nodes: pd.DataFrame, op_rows: pd.DataFrame,
                    host_bound: np.ndarray) -> pd.DataFrame:  # fmt: skip
    """Every op measurement of `gpu` a network's visit would give, as rows with `model` (the network that
    ran it), `device_config`, `measured_s` and KEY_COLUMNS: NeuSight's per-node forward times (CUDA events)
    of each network, and the thesis' op rows of the networks' ops (matched by op key within the device
    config; its host-bound wall-clock rows left out, as the op model leaves them: they time the host)."""
    held = nets[nets["gpu"] == gpu]
    model_of = dict(zip(held["config"], held["model"]))
    nd = nodes[nodes["config"].isin(held["config"])]
    frames = []
    timed = nd[nd["measured_fw_s"].to_numpy(float) > 0]
    if len(timed):
        frames.append(timed.assign(model=timed["config"].map(model_of), measured_s=timed["measured_fw_s"],
                                   wall_clock=0.0))  # fmt: skip
    rows = op_rows[(op_rows["device_config"].map(_gpu) == gpu) & ~np.asarray(host_bound, bool)]
    untimed = nd[~(nd["measured_fw_s"].to_numpy(float) > 0)]
    if len(rows) and len(untimed):
        rk = op_keys(rows)
        for cfg, d in untimed.groupby("device_config"):
            sel = rows[(rows["device_config"] == cfg).to_numpy()]
            keys = rk[(rows["device_config"] == cfg).to_numpy()]
            for model, m in d.groupby(d["config"].map(model_of)):
                hit = keys.isin(set(op_keys(m)))
                if hit.any():
                    frames.append(sel[hit.to_numpy()].assign(model=model, measured_s=sel["t_s"][hit.to_numpy()]))
    cols = ["model", "device_config", "measured_s", "wall_clock", *KEY_COLUMNS, "winograd"]
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    if "winograd" not in out:
        out["winograd"] = 0.0
    return out[cols].reset_index(drop=True)


def _gpu(device_config: Any) -> str:
    from opcost.model.crossdevice.xdevice import gpu_of

    return gpu_of(str(device_config))


def shrink_weight(log_errors: pd.DataFrame, n: int) -> float:
    """How much of one GPU's measured network error carries to its other networks: the empirical-Bayes
    weight var_between / (var_between + var_within / n) of a GPU bias seen through `n` networks, from the
    held-out network errors of other GPUs (`log_errors`: gpu, log_error): the variance of their GPU means,
    and the mean of their within-GPU variances. Why: on a GPU whose networks miss alike (the RTX 2080 Ti,
    +19 % each), one network's error is the others'; on one whose networks scatter around zero (the A30),
    it is mostly that network's own and would move the rest the wrong way."""
    g = log_errors.groupby("gpu")["log_error"]
    means, within = g.mean(), g.var(ddof=1).dropna()
    if len(means) < 2 or within.empty:
        return 0.0
    vb, vw = float(means.var(ddof=1)), float(within.mean())
    return vb / (vb + vw / max(n, 1)) if vb > 0 else 0.0


def network_scale(measured_s: Any, predicted_s: Any, weight: float) -> float:
    """The factor a GPU's measured networks put on its other networks: exp(weight x mean log(measured /
    predicted)); 1 without any."""
    m, p = np.asarray(measured_s, float), np.asarray(predicted_s, float)
    ok = (m > 0) & (p > 0)
    return float(np.exp(weight * np.mean(np.log(m[ok] / p[ok])))) if ok.any() else 1.0


VARIANTS = ("ops", "network")  # the kind factors of the measured ops; the measured network's shrunk scale


def evaluate(nets: pd.DataFrame, nodes: pd.DataFrame, op_rows: pd.DataFrame, host_bound: np.ndarray,
             fold_models: dict[str, Any], logo: pd.DataFrame, hosts: dict[str, Any] | None = None,
             min_models: int = 3) -> pd.DataFrame:  # fmt: skip
    """Per GPU with at least `min_models` measured networks (models) and per choice of the measured one:
    every other model's networks on that GPU predicted by the fold that never saw the GPU, without and with
    that one's measurements: `ops` keeps the measured ops as the GPU's own and corrects the others by their
    kind's factor (`corrected`); `network` scales the transferred answer by the measured model's networks'
    error (`network_scale`, weighted by `shrink_weight` from the other GPUs' held-out errors in `logo`: gpu,
    measured_s, predicted_s), its ops transferred as before: a scale learnt on transferred answers applies
    to transferred answers. One row per (gpu, measured model, predicted network)."""
    from opcost.model.crossdevice import xdevice_net

    errs = logo.assign(log_error=np.log(logo["predicted_s"] / logo["measured_s"]))
    out = []
    for g, op_model in sorted(fold_models.items()):
        held = nets[nets["gpu"] == g].reset_index(drop=True)
        if held["model"].nunique() < min_models:
            continue
        comp = xdevice_net.fold_composition(nets, nodes, g, op_model, hosts)
        nd = nodes[nodes["config"].isin(held["config"])].reset_index(drop=True)
        t_fw = op_model.predict(xdevice_net.device_rows(nd))
        base = xdevice_net.predict_nets(held, nd, t_fw, comp)
        meas = op_measurements(g, nets, nodes, op_rows, host_bound)
        if len(meas):
            meas = meas.assign(predicted_s=op_model.predict(meas))  # in the measurement's units (wall_clock)
        keys = op_keys(nd)
        others_err = errs[errs["gpu"] != g]
        for model in sorted(held["model"].unique()):
            mine = meas[meas["model"] == model]
            if mine.empty:
                continue
            mk = op_keys(mine)
            own = own_times(keys, mk, mine["measured_s"])
            hit = np.isfinite(own) & (own > 0)
            with_ops = xdevice_net.predict_nets(held, nd, corrected(nd, t_fw, mine), comp)
            is_mine = (held["model"] == model).to_numpy()
            w = shrink_weight(others_err, int(is_mine.sum()))
            scale = network_scale(held["measured_s"][is_mine], base[is_mine], w)
            for i in np.flatnonzero(~is_mine):
                sel = (nd["config"] == held.at[i, "config"]).to_numpy()
                out.append({"gpu": g, "set": held.at[i, "set"], "measured_model": model, "model": held.at[i, "model"],
                            "config": held.at[i, "config"], "mode": held.at[i, "mode"],
                            "measured_s": float(held.at[i, "measured_s"]), "without_s": float(base[i]),
                            "ops_s": float(with_ops[i]), "network_s": float(base[i] * scale),
                            "measured_ops": int(len(mine)), "weight": w, "scale": scale,
                            "own_op_share": float(hit[sel].mean()) if sel.any() else 0.0})  # fmt: skip
    df = pd.DataFrame(out)
    if len(df):
        for c in ("without", *VARIANTS):
            df[f"{c}_error_pct"] = 100 * (df[f"{c}_s"] / df["measured_s"] - 1)
    return df


def summary(df: pd.DataFrame, shipped: str = "ops") -> dict[str, Any]:
    """Per GPU (each choice of the measured model weighing the same) and over GPUs (each GPU the same): the
    MAPE of the other networks without and with each variant, the ratio with / without (goal <= 0.5), the
    best and worst choice; `shipped` names the variant answers use (model/prediction/xdevice_predict.py)."""
    if df.empty:
        return {"per_gpu": {}, "gpus": 0, "shipped": shipped}
    per: dict[str, Any] = {}
    for g, d in df.groupby("gpu"):
        by = d.groupby("measured_model")[[f"{c}_error_pct" for c in ("without", *VARIANTS)]].agg(
            lambda s: float(s.abs().mean())
        )
        row: dict[str, Any] = {"choices": int(len(by)), "networks": int(d["config"].nunique()),
                               "mape_without": float(by["without_error_pct"].mean())}  # fmt: skip
        for v in VARIANTS:
            col = by[f"{v}_error_pct"]
            row[v] = {"mape": float(col.mean()), "ratio": float(col.mean() / row["mape_without"]),
                      "best_choice_mape": float(col.min()), "worst_choice_mape": float(col.max()),
                      "choices_better": int((col < by["without_error_pct"]).sum())}  # fmt: skip
        per[str(g)] = row
    mw = float(np.mean([v["mape_without"] for v in per.values()]))
    out: dict[str, Any] = {"per_gpu": per, "gpus": len(per), "mape_without": mw, "goal_ratio": 0.5, "shipped": shipped}
    for v in VARIANTS:
        mv = float(np.mean([p[v]["mape"] for p in per.values()]))
        out[v] = {"mape": mv, "ratio": mv / mw}
    return out


# -- energy ------------------------------------------------------------------------------------------------
def power_level(measured_w: Any, predicted_w: Any) -> float:
    """A GPU's power level from its measured networks: exp(mean log(measured / predicted power)); 1 without
    any. Unshrunk, unlike the time factors: the power model's miss on a GPU is one level for all its networks
    (the thesis A30 draws 164 +- 0.3 W on every network, predicted 95-118 W), not a per-network scatter."""
    m, p = np.asarray(measured_w, float), np.asarray(predicted_w, float)
    ok = np.isfinite(m) & np.isfinite(p) & (m > 0) & (p > 0)
    return float(np.exp(np.mean(np.log(m[ok] / p[ok])))) if ok.any() else 1.0


def energy_table(en: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and per choice of the measured model: every other network's energy without and with the power
    level of the measured model's networks (`power_level`). `en`: transferred energy rows (validate's
    xdevice_energy: gpu, set_id, mode, predicted_s, measured_w, predicted_w, measured_j, predicted_j), time and
    power both from models that never saw the GPU; the level multiplies the power, the time stays."""
    out = []
    model = en["set_id"].astype(str).str.split(":").str[0]
    for _, d in en.assign(model=model).groupby("gpu", sort=True):
        for m in sorted(d["model"].unique()):
            mine, others = d[d["model"] == m], d[d["model"] != m]
            if others.empty:
                continue
            level = power_level(mine["measured_w"], mine["predicted_w"])
            out.append(others.assign(measured_model=m, level=level, with_w=others["predicted_w"] * level,
                                     with_j=others["predicted_j"] * level))  # fmt: skip
    if not out:
        return pd.DataFrame()
    df = pd.concat(out, ignore_index=True)
    df["without_error_pct"] = 100 * (df["predicted_j"] / df["measured_j"] - 1)
    df["with_error_pct"] = 100 * (df["with_j"] / df["measured_j"] - 1)
    return df


def energy_summary(df: pd.DataFrame) -> dict[str, Any]:
    """Per GPU (each measured model weighing the same): energy and power MAPE without and with the level."""
    out: dict[str, Any] = {}
    for g, d in df.groupby("gpu"):
        err = pd.DataFrame({
            "e0": d["without_error_pct"].abs(), "e1": d["with_error_pct"].abs(),
            "p0": 100 * (d["predicted_w"] / d["measured_w"] - 1).abs(),
            "p1": 100 * (d["with_w"] / d["measured_w"] - 1).abs(),
        }).groupby(d["measured_model"]).mean()  # fmt: skip
        out[str(g)] = {"choices": int(len(err)), "energy_mape_without": float(err["e0"].mean()),
                       "energy_mape_with": float(err["e1"].mean()), "power_mape_without": float(err["p0"].mean()),
                       "power_mape_with": float(err["p1"].mean())}  # fmt: skip
    return out


# -- answers --------------------------------------------------------------------------------------------
def device_factors(
    op_model: Any, measured_rows: list[tuple[dict[str, Any], float]], found: DeviceConfig
) -> dict[str, float]:
    """The kind factors (`kind_factors`) of a GPU from its measured ops ((cross-device row, GPU time per
    call), model/crossdevice/measured.op_rows_measured) against `op_model`'s transferred device times; {} without
    any."""
    if not measured_rows:
        return {}
    rows = pd.DataFrame([r for r, _ in measured_rows]).assign(device_config=found.name, wall_clock=0.0)
    return kind_factors(rows["xkind"], [t for _, t in measured_rows], op_model.predict(rows, found))
