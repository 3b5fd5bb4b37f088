"""Whole networks against their operations: summed-measured, predicted, and across device configs.

Summed versus measured: for every measured whole network, the sum over its operations of the
measured per-op cost x calls, against the network's own measurement. Only ops with a measurement
on the same device config and mode enter the sum; the share of the network's FLOPs and calls they
hold is reported beside it (the thesis' op set leaves residual additions, pooling, flatten ... out).
Uncertainties: the per-op sigmas are propagated as independent, sigma_sum = sqrt(sum (calls x
sigma_i)^2). Training networks are one SGD step (with loss and optimizer step, which no op covers)
against the ops' forward+backward measurements.

Predicted versus measured, IN-SAMPLE (the shipped bundles' look-up and composition layer saw these
networks): kept for reference only; the out-of-sample figures come from the train stages
(leave-one-network-out and -family-out, model/training/netval.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from opcost.model.prediction.answer import Request
from opcost.model.training import netval
from opcost.modes import OP_PHASE


def summed_vs_measured(
    nets: pd.DataFrame, ops: pd.DataFrame, occurrences: pd.DataFrame, catalog: pd.DataFrame
) -> pd.DataFrame:
    """One row per measured network (default clock and power limit) with its op sum."""
    flops = catalog.set_index("op_id")["flops"]
    rows = []
    base = nets[nets["clock_mhz"].isna() & nets["power_limit_w"].isna()]
    for _, n in base.iterrows():
        occ = occurrences[(occurrences["set_id"] == n["set_id"]) & (occurrences["mode"] == n["mode"])]
        if occ.empty:
            continue
        m = ops[
            (ops["device_config"] == n["device_config"])
            & (ops["mode"] == n["mode"])
            & (ops["phase"] == OP_PHASE[n["mode"]])
            & ops["clock_mhz"].isna()
            & ops["power_limit_w"].isna()
        ].set_index("op_id")
        hit = occ[occ["op_id"].isin(m.index)]
        calls = hit["calls"].to_numpy(float)
        mm = m.loc[hit["op_id"]]
        t_sum = float((mm["t_s"].to_numpy() * calls).sum())
        t_sig = float(np.sqrt(np.nansum((mm["sigma_t_s"].to_numpy() * calls) ** 2)))
        has_e = mm["e_j"].notna().all() and pd.notna(n["e_j"])
        e_sum = float((mm["e_j"].to_numpy() * calls).sum()) if has_e else np.nan
        e_sig = float(np.sqrt(np.nansum((mm["sigma_e_j"].to_numpy() * calls) ** 2))) if has_e else np.nan
        f_all = float((occ["op_id"].map(flops) * occ["calls"]).sum())
        f_hit = float((hit["op_id"].map(flops) * hit["calls"]).sum())
        rows.append(
            {
                "set_id": n["set_id"],
                "model": n["model"],
                "device_config": n["device_config"],
                "mode": n["mode"],
                "measured_t_s": n["t_s"],
                "measured_sigma_t_s": n["sigma_t_s"],
                "summed_t_s": t_sum,
                "summed_sigma_t_s": t_sig,
                "measured_e_j": n["e_j"],
                "measured_sigma_e_j": n["sigma_e_j"],
                "summed_e_j": e_sum,
                "summed_sigma_e_j": e_sig,
                "t_error": t_sum / n["t_s"] - 1,
                "e_error": (e_sum / n["e_j"] - 1) if has_e else np.nan,
                "flops_share": f_hit / f_all if f_all else np.nan,
                "calls_share": float(hit["calls"].sum() / occ["calls"].sum()),
                "network_gflops": f_all / 1e9,
                "sources": n["sources"],
            }
        )
    return pd.DataFrame(rows)


def predicted_vs_measured(nets: pd.DataFrame, predictor: Any) -> pd.DataFrame:
    """The measured networks predicted by the bundle of their device config and mode, where one exists."""
    targets = set(predictor.targets())
    base = nets[nets["clock_mhz"].isna() & nets["power_limit_w"].isna()]
    rows, requests = [], []
    for _, n in base.iterrows():
        if f"{n['device_config']}-{n['mode']}" in targets:
            requests.append(Request(n["model"], tuple(int(x) for x in n["input_shape"]), n["device_config"], n["mode"]))
            rows.append(n)
    preds = predictor.predict_many(requests) if requests else []
    out = []
    for n, p in zip(rows, preds):
        out.append(
            {
                "set_id": n["set_id"],
                "model": n["model"],
                "device_config": n["device_config"],
                "mode": n["mode"],
                "measured_t_s": n["t_s"],
                "predicted_t_s": p.time_s,
                "t_error": p.time_s / n["t_s"] - 1,
                "measured_e_j": n["e_j"],
                "predicted_e_j": p.energy_j,
                "e_error": (p.energy_j / n["e_j"] - 1) if p.energy_j is not None and pd.notna(n["e_j"]) else np.nan,
                "measured_time_share": p.coverage()["time"].get("measured", 0.0),
            }
        )
    return pd.DataFrame(out)


def error_summary(df: pd.DataFrame, predicted: str = "predicted") -> dict[str, Any]:
    """Per device config and mode (in %, with counts): time MAPE, median absolute percentage error and
    time-weighted error (sum |error| / sum measured time, which a few small networks cannot dominate),
    and energy MAPE; the errors of `<predicted>_t_s` / `_e_j` against the measurements, computed as
    the out-of-sample figures are (model/training/netval.error_summary)."""
    cols = {f"{predicted}_t_s": "predicted_t_s", f"{predicted}_e_j": "predicted_e_j"}
    out: dict[str, Any] = {}
    for (dev, mode), g in df.groupby(["device_config", "mode"]):
        s = netval.error_summary(g.rename(columns=cols))
        t, e = s["time"], s.get("energy")
        out[f"{dev}-{mode}"] = {
            "networks": s["networks"],
            "time_mape_pct": t["mape_pct"],
            "time_mdape_pct": t["mdape_pct"],
            "time_weighted_pct": t["weighted_pct"],
            "energy_mape_pct": e["mape_pct"] if e else None,
        }
    return out


def tensor_cores(nets: pd.DataFrame, configs: tuple[str, ...] = ("A30", "A30_no_tf32", "RTX2080Ti")) -> pd.DataFrame:
    """Inference energy per network on each config, and the differences relative to the A30 (TF32)."""
    inf = nets[(nets["mode"] == "inference") & nets["device_config"].isin(configs) & nets["clock_mhz"].isna()]
    wide = inf.pivot_table(index="set_id", columns="device_config", values="e_j")
    wide = wide.dropna(subset=[c for c in configs if c in wide.columns])
    ref = configs[0]
    for c in configs[1:]:
        if c in wide.columns and ref in wide.columns:
            wide[f"{c}_vs_{ref}"] = wide[c] / wide[ref] - 1
    return wide.sort_values(ref).reset_index()
