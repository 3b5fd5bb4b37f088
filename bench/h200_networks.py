"""The H200's networks, predicted against what the first visit measured of them as wholes.

Each network the visit measured (data/raw/visit-h200/networks.parquet, two trials) is predicted on the H200
by `opcost.api.predict`: its ops measured on the H200 where the probe or a visit measured them
(models/measured), the rest transferred. The network measurements themselves are used by no model, so this
is out of sample for the composition; the ops of these networks are partly the ones the visits measured.

    PYTHONPATH=src python bench/h200_networks.py

Writes reports/bench/h200_networks.json.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

import benchreport
from opcost.api import predict
from opcost.paths import Paths


def main() -> int:
    paths = Paths(benchreport.ROOT)
    nets = pd.read_parquet(paths.raw_dir("visit-h200") / "networks.parquet")
    nets = nets[nets["status"] == "ok"]
    rows = []
    for (set_id, mode), g in nets.groupby(["set_id", "mode"], sort=True):
        shape = tuple(int(x) for x in g["input_shape"].iloc[0])
        p = predict(str(g["model"].iloc[0]), shape, device="H200", mode=str(mode))
        measured_t = float(g["mean_s"].mean())
        lo, hi = p.time_interval_s
        rows.append(
            {
                "set_id": set_id,
                "mode": mode,
                "measured_ms": 1e3 * measured_t,
                "predicted_ms": 1e3 * p.time_s,
                "error": p.time_s / measured_t - 1,
                "covered": bool(lo <= measured_t <= hi),
                "measured_power_w": float(g["power_w"].mean()) if g["power_w"].notna().any() else None,
                "predicted_power_w": None if p.energy_j is None else p.energy_j / p.time_s,
            }
        )
    df = pd.DataFrame(rows)
    summary = {}
    for mode, m in df.groupby("mode"):
        e = m["error"].abs()
        pw = m.dropna(subset=["measured_power_w", "predicted_power_w"])
        pe = (pw["predicted_power_w"] / pw["measured_power_w"] - 1).abs()
        summary[str(mode)] = {
            "networks": len(m),
            "time_mape": float(100 * e.mean()),
            "time_median_signed_pct": float(100 * m["error"].median()),
            "time_coverage": float(m["covered"].mean()),
            "power_mape": float(100 * pe.mean()) if len(pe) else None,
        }
        print(mode, summary[str(mode)])
    report = {"summary": summary, "networks": df.replace({np.nan: None}).to_dict("records")}
    return benchreport.save(report, "h200_networks.json")


if __name__ == "__main__":
    sys.exit(main())
