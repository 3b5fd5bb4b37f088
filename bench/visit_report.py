"""What a landed GPU visit measured: energy rows and their bounds, trial-to-trial spread, host and GPU apart,
the energy-counter check, and how long it took against the dry-run estimate.

    PYTHONPATH=src python bench/visit_report.py [--campaign visit-h200 --campaign visit-h200-more]

Reads data/raw/<campaign>/ (DVC; `dvc pull` first) and writes reports/bench/visit.json.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pandas as pd

import benchreport
from opcost.paths import Paths


def spread(rows: pd.DataFrame, key: str, col: str) -> dict[str, float | int]:
    """Trial-to-trial spread of `col` per (item, mode) with two trials: |a - b| / mean."""
    g = rows.groupby([key, "mode"])[col].agg(["min", "max", "count"])
    g = g[(g["count"] == 2) & (g["min"] > 0)]
    s = (g["max"] - g["min"]) / ((g["max"] + g["min"]) / 2)
    return {"items": len(s), "median": float(s.median()), "p90": float(s.quantile(0.9))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", action="append", default=None)
    a = ap.parse_args()
    names = a.campaign or ["visit-h200", "visit-h200-more"]
    paths = Paths(benchreport.ROOT)
    ops, nets, metas = [], [], []
    for name in names:
        d = paths.raw_dir(name)
        ops.append(pd.read_parquet(d / "timings.parquet"))
        nets.append(pd.read_parquet(d / "networks.parquet"))
        metas.append(json.loads((d / "campaign.json").read_text()))
    t, n = pd.concat(ops, ignore_index=True), pd.concat(nets, ignore_index=True)
    ok_t, ok_n = t[t["status"] == "ok"], n[n["status"] == "ok"]
    both = pd.concat([ok_t, ok_n], ignore_index=True)
    check = json.loads((paths.raw_dir(names[0]) / "energy_counter_check.json").read_text())
    trials_s = float((both["ended_at"] - both["started_at"]).sum())
    host_share = ok_t["host_time_per_call_s"] / ok_t["mean_s"]
    gpu_share = ok_t["gpu_time_per_call_s"] / ok_t["mean_s"]
    report = {
        "campaigns": names,
        "device": metas[0]["environment"].get("device_name"),
        "host_cpu": metas[0]["environment"].get("cpu"),
        "torch": metas[0]["environment"].get("torch"),
        "rows": {"ops": len(t), "networks": len(n), "failed": int((t["status"] == "failed").sum())},
        "energy": {
            "rows": len(both),
            "flagged": int(both["energy_flag"].notna().sum()),
            "bound_median": float(both["energy_bound"].median()),
            "bound_p90": float(both["energy_bound"].quantile(0.9)),
            "window_median_s": float(both["window_time_s"].median()),
            "window_max_s": float(both["window_time_s"].max()),
            "counter_updates_median": float(both["counter_updates"].median()),
            "counter_period": metas[0]["energy_counter"],
        },
        "trial_spread": {
            "op_energy": spread(ok_t, "op_id", "energy_per_iter_j"),
            "op_time": spread(ok_t, "op_id", "mean_s"),
            "network_energy": spread(ok_n, "set_id", "energy_per_iter_j"),
            "network_time": spread(ok_n, "set_id", "mean_s"),
        },
        "host_and_gpu": {
            "op_rows_with_split": int(ok_t["gpu_time_per_call_s"].notna().sum()),
            "gpu_over_wall_median": float(gpu_share.median()),
            "host_over_wall_median": float(host_share.median()),
            "host_bound_share": float((ok_t["host_time_per_call_s"] > ok_t["gpu_time_per_call_s"]).mean()),
            "host_per_call_us_median": float(1e6 * ok_t["host_time_per_call_s"].median()),
            "gpu_per_call_us_median": float(1e6 * ok_t["gpu_time_per_call_s"].median()),
        },
        "energy_counter_check": {
            k: check.get(k)
            for k in ("counter_power_w", "relative_difference", "aligned_power_w", "short_windows", "seconds")
        },
        "duration": {
            "trials_s": trials_s,
            "estimated_s_at_the_visit": 391.0,  # the dry run before the visit (constants then uncalibrated)
            "power_w_median": float(np.median(both["power_w"].dropna())),
        },
    }
    return benchreport.save(report, "visit.json")


if __name__ == "__main__":
    sys.exit(main())
