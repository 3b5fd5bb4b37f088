"""The H200's networks, predicted against what the first visit measured of them as wholes.

Each network the visit measured (data/raw/visit-h200/networks.parquet, two trials) is predicted on the H200
by `opcost.api.predict`: its ops measured on the H200 where the probe or a visit measured them
(models/measured), the rest transferred. The network measurements themselves are used by no model, so this
is out of sample for the composition; the ops of these networks are partly the ones the visits measured.

Each is also predicted transferred only: from a root holding the cross-device, power and clock models but no
models/measured, so no op of the H200 is measured; the host is the reference host (h200-visit, the visit's own
CPU). The pair is "a new GPU with and without its measured ops" for the networks the visit measured.

Power is not out of sample here: the H200's networks are rows of the power model's fit and set its power level
(models/xpower `levels`), in both runs.

    PYTHONPATH=src python bench/h200_networks.py

Writes reports/bench/h200_networks.json.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import benchreport
from opcost.api import predict
from opcost.paths import Paths


def transferred_root(paths: Paths, tmp: Path) -> Paths:
    """A root with the cross-device, power and clock models and params.yaml, without models/measured."""
    for rel in ("params.yaml", "models/xdevice", "models/xpower", "models/clock"):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).symlink_to(paths.root / rel)
    return Paths(tmp)


def summarise(df: pd.DataFrame) -> dict[str, dict]:
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
    return summary


def main() -> int:
    from opcost.model.prediction.predict import Predictor

    paths = Paths(benchreport.ROOT)
    nets = pd.read_parquet(paths.raw_dir("visit-h200") / "networks.parquet")
    nets = nets[nets["status"] == "ok"]
    rows: dict[str, list[dict]] = {"with_measured_ops": [], "transferred_only": []}
    with tempfile.TemporaryDirectory() as tmp:
        bare = Predictor(paths=transferred_root(paths, Path(tmp)), disk_cache=False)
        for (set_id, mode), g in nets.groupby(["set_id", "mode"], sort=True):
            shape = tuple(int(x) for x in g["input_shape"].iloc[0])
            model = str(g["model"].iloc[0])
            measured_t = float(g["mean_s"].mean())
            for key, p in (("with_measured_ops", predict(model, shape, device="H200", mode=str(mode))),
                           ("transferred_only", bare.predict(model, shape, "H200", str(mode)))):  # fmt: skip
                lo, hi = p.time_interval_s
                rows[key].append(
                    {
                        "set_id": set_id,
                        "mode": mode,
                        "measured_ms": 1e3 * measured_t,
                        "predicted_ms": 1e3 * p.time_s,
                        "error": p.time_s / measured_t - 1,
                        "covered": bool(lo <= measured_t <= hi),
                        "measured_power_w": float(g["power_w"].mean()) if g["power_w"].notna().any() else None,
                        "predicted_power_w": None if p.energy_j is None else p.energy_j / p.time_s,
                        "host": None if p.host is None else p.host["name"],
                        "host_bound_share": None if p.host is None else p.host["host_bound_share"],
                    }
                )
    frames = {k: pd.DataFrame(v) for k, v in rows.items()}
    report: dict = {"summary": summarise(frames["with_measured_ops"]),
                    "summary_transferred_only": summarise(frames["transferred_only"])}  # fmt: skip
    for k in ("summary", "summary_transferred_only"):
        print(k, report[k])
    report["networks"] = frames["with_measured_ops"].replace({np.nan: None}).to_dict("records")
    report["networks_transferred_only"] = frames["transferred_only"].replace({np.nan: None}).to_dict("records")
    return benchreport.save(report, "h200_networks.json")


if __name__ == "__main__":
    sys.exit(main())
