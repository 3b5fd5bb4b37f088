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
import shutil
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


def _cold(cmd: list[str], env: dict[str, str], runs: int = 3, clear_cache: Path | None = None) -> list[float]:
    times = []
    for _ in range(runs):
        if clear_cache is not None:
            shutil.rmtree(clear_cache, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    paths = Paths(ROOT)
    params = load_params(paths.params)
    sets = [s for s in params.extract.sets if "inference" in s.modes]
    cache = ROOT / ".opcost" / "cache" / "networks"
    shutil.rmtree(cache, ignore_errors=True)
    pred = Predictor(paths=paths)
    devices = [t.rpartition("-")[0] for t in pred.targets() if t.endswith("-inference")]
    if not devices:
        print("no inference models under models/: run `dvc repro` or `dvc pull` first", file=sys.stderr)
        return 2
    requests = [(s.model, s.input_shape, d, "inference", None) for s in sets for d in devices]

    t0 = time.perf_counter()
    pred.predict_many(requests)  # extraction (torch), encoding, bundle loading, disk cache written
    first_total = time.perf_counter() - t0

    batched, sequential = [], []
    for _ in range(7):
        t0 = time.perf_counter()
        pred.predict_many(requests)
        batched.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for r in requests:
            pred.predict(*r)
        sequential.append(time.perf_counter() - t0)

    cmd = [
        sys.executable,
        "-m",
        "opcost",
        "predict",
        "--model",
        "resnet50",
        "--input-shape",
        "32,3,224,224",
        "--device",
        devices[0],
        "--json",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cold_uncached = _cold(cmd, env, clear_cache=cache)
    cold_cached = _cold(cmd, env)

    med = statistics.median
    result = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "sets": len(sets),
        "devices": devices,
        "predictions_per_pass": len(requests),
        "first_pass_s": first_total,
        "warm_batched_s": {
            "median": med(batched),
            "runs": batched,
            "what": "predict_many over all sets x devices: one model evaluation per device and quantity",
        },
        "warm_sequential_s": {
            "median": med(sequential),
            "runs": sequential,
            "what": "one predict() call per set and device",
        },
        "warm_target_s": 0.1,
        "warm_batched_meets_target": med(batched) < 0.1,
        "warm_sequential_meets_target": med(sequential) < 0.1,
        "cold_process_cached_s": {
            "median": med(cold_cached),
            "runs": cold_cached,
            "what": "new process, network extracted before (.opcost/cache): no torch import",
        },
        "cold_process_uncached_s": {
            "median": med(cold_uncached),
            "runs": cold_uncached,
            "what": "new process, cache cleared: imports torch and torchvision and traces the network",
        },
        "command": " ".join(cmd[1:]),
        "cold_target_s": 3.0,
        "cold_cached_meets_target": med(cold_cached) < 3.0,
        "cold_uncached_meets_target": med(cold_uncached) < 3.0,
    }
    write_json(result, ROOT / "reports" / "bench" / "predictor_latency.json")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
