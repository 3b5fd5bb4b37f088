"""Predictor latency: warm end-to-end for the thesis' 18 inference sets on every device, and cold
`opcost predict` processes. Targets: under 100 ms warm for all 18 x devices, under 3 s cold for a
never-seen network (the thesis needed about 30 s to load and 0.5 s to preprocess).

    .venv/bin/python bench/predictor_latency.py          # PYTHONPATH is set by the script

Cold start is measured on a user's model file never seen before (cache cleared each run), beside the
floor no prediction can beat: `python -c "import torch"` timed in the same run, on the same machine
and load. On a shared, busy machine the absolute seconds move with the load; the time above that
floor (what opcost adds) is the comparable figure. One more run with `python -X importtime` says
where the time goes (the largest imports, cumulative).

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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opcost.io import write_json  # noqa: E402
from opcost.model.prediction.answer import Request  # noqa: E402
from opcost.model.prediction.predict import Predictor  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.paths import Paths  # noqa: E402


def _cold(cmd: list[str], env: dict[str, str], runs: int = 3, clear_cache: Path | None = None) -> list[float]:
    times = []
    for _ in range(runs):
        if clear_cache is not None:
            shutil.rmtree(clear_cache, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


USER_MODEL = """
from torch import nn


def net():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, 10),
    )
"""

# Cumulative import times worth naming in the report (what a cold prediction loads, or should not).
WATCHED = ("torch", "torchvision", "torch._dynamo", "sympy", "pandas", "mlflow", "numpy", "typer", "rich",
           "yaml", "opcost.cli", "opcost.model.prediction.predict", "opcost.ops.catalog")  # fmt: skip


def _import_profile(cmd: list[str], env: dict[str, str], cache: Path) -> dict[str, float]:
    """Seconds (cumulative) of the watched top-level imports of one cold run, from `-X importtime`."""
    shutil.rmtree(cache, ignore_errors=True)
    res = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=ROOT, env=env, capture_output=True, text=True)
    out: dict[str, float] = {}
    for line in res.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if name.strip() in WATCHED and cumulative.strip().isdigit():
            out[name.strip()] = out.get(name.strip(), 0.0) + int(cumulative) / 1e6
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> int:
    paths = Paths(ROOT)
    params = load_params(paths.params)
    sets = [s for s in params.extract.sets if "inference" in s.modes and not s.is_user]  # image networks
    cache = ROOT / ".opcost" / "cache" / "networks"
    shutil.rmtree(cache, ignore_errors=True)
    pred = Predictor(paths=paths)
    devices = [t.rpartition("-")[0] for t in pred.targets() if t.endswith("-inference")]
    if not devices:
        print("no inference models under models/: run `dvc repro` or `dvc pull` first", file=sys.stderr)
        return 2
    requests = [Request(s.model, s.input_shape, d, "inference") for s in sets for d in devices]

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

    # A never-seen user's file, beside the `import torch` floor measured in the same run.
    tmp = Path(tempfile.mkdtemp(prefix="opcost-bench-"))
    (tmp / "usernet.py").write_text(USER_MODEL)
    user_cmd = [sys.executable, "-m", "opcost", "predict", "--model", f"{tmp / 'usernet.py'}:net",
                "--input", "float32:32,3,64,64", "--device", devices[0], "--json"]  # fmt: skip
    floor = _cold([sys.executable, "-c", "import torch"], env, runs=5)
    user_cold = _cold(user_cmd, env, runs=5, clear_cache=cache)
    imports = _import_profile(user_cmd, env, cache)
    shutil.rmtree(tmp, ignore_errors=True)

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
        "cold_never_seen_user_file_s": {
            "median": med(user_cold),
            "runs": user_cold,
            "what": "new process, a user's model file never seen before (cache cleared): imports torch, traces "
            "the network on meta tensors, costs it; no torchvision, TorchDynamo, pandas or MLflow",
            "command": "python -m opcost predict --model usernet.py:net --input float32:32,3,64,64 --json",
        },
        "import_torch_floor_s": {
            "median": med(floor),
            "runs": floor,
            "what": "python -c 'import torch' in the same run: the floor no cold prediction can beat",
        },
        "cold_never_seen_above_floor_s": med(user_cold) - med(floor),
        "cold_never_seen_meets_target": med(user_cold) < 3.0,
        "cold_never_seen_imports_s": {
            "cumulative": imports,
            "what": "one more cold run under `python -X importtime`: cumulative seconds of the named imports",
        },
        "load": {
            "loadavg_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "note": "a shared machine: compare the time above the import-torch floor, measured in the same run",
        },
    }
    write_json(result, Paths(ROOT).predictor_latency)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
