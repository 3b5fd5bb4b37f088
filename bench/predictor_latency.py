"""Predictor latency: warm end-to-end for the thesis' 18 inference sets on every device, and a
cold `opcost predict` process. Targets: under 100 ms warm for all 18 x devices, under 3 s cold
(the thesis needed about 30 s to load and 0.5 s to preprocess).

    PYTHONPATH=src python bench/predictor_latency.py

Writes reports/bench/predictor_latency.json. Run after `dvc repro` (or `dvc pull`) so models/ exists.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opcost.config import Paths, load_params  # noqa: E402
from opcost.io import write_json  # noqa: E402
from opcost.model.predict import Predictor  # noqa: E402


def main() -> int:
    paths = Paths(ROOT)
    params = load_params(paths.params)
    sets = [s for s in params.extract.sets if "inference" in s.modes]
    pred = Predictor(paths=paths)
    devices = [t.rpartition("-")[0] for t in pred.targets() if t.endswith("-inference")]
    if not devices:
        print("no inference models under models/: run `dvc repro` or `dvc pull` first", file=sys.stderr)
        return 2

    def one_pass() -> dict[str, float]:
        times = {}
        for s in sets:
            for d in devices:
                t0 = time.perf_counter()
                pred.predict(s.model, s.input_shape, d, "inference")
                times[f"{s.set_id}@{d}"] = time.perf_counter() - t0
        return times

    t0 = time.perf_counter()
    first = one_pass()  # extraction, feature encoding and model loading happen here
    first_total = time.perf_counter() - t0
    warm_totals, last = [], {}
    for _ in range(5):
        t0 = time.perf_counter()
        last = one_pass()
        warm_totals.append(time.perf_counter() - t0)

    cmd = [sys.executable, "-m", "opcost", "predict", "--model", "resnet50", "--input-shape", "32,3,224,224",
           "--device", devices[0], "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cold = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        cold.append(time.perf_counter() - t0)

    result = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "sets": len(sets),
        "devices": devices,
        "predictions_per_pass": len(first),
        "first_pass_s": first_total,
        "first_pass_per_prediction_s": {k: round(v, 4) for k, v in first.items()},
        "warm_pass_s": {"median": statistics.median(warm_totals), "min": min(warm_totals), "runs": warm_totals},
        "warm_per_prediction_s": {k: round(v, 5) for k, v in last.items()},
        "warm_target_s": 0.1,
        "warm_meets_target": statistics.median(warm_totals) < 0.1,
        "cold_process_s": {"median": statistics.median(cold), "runs": cold, "command": " ".join(cmd[1:])},
        "cold_target_s": 3.0,
        "cold_meets_target": statistics.median(cold) < 3.0,
    }
    write_json(result, ROOT / "reports" / "bench" / "predictor_latency.json")
    print(json.dumps({k: v for k, v in result.items() if "per_prediction" not in k}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
