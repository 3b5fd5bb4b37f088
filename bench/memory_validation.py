"""Predicted peak memory (meta-device trace, ops/memory.py) against what the CPU allocator records.

For each network and mode (inference; one training step with SGD-momentum and with Adam) this
builds the network twice: on meta tensors for the prediction, and on the CPU with seeded random
weights for the measurement, and runs the same step on both.

Measurement: `torch.profiler.profile(profile_memory=True)` records every allocation and free the
CPU allocator makes during the step; the peak of their running sum, plus the bytes that exist
before the step starts (parameters, buffers, inputs and, in training, the optimizer state, summed
over their storages), is the measured peak. The prediction compared is `peak_raw_bytes` (sizes as
requested: the CPU allocator does not round to 512 B blocks). Limits: allocations a library makes
outside PyTorch's allocator (oneDNN scratchpads, OpenMP buffers) are not recorded; CPU kernels are
not the CUDA ones, so a CUDA-specific workspace is not checked here.

    PYTHONPATH=src python bench/memory_validation.py [--quick]

Writes reports/bench/memory_validation.json and reports/memory_validation.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

from opcost.io import atomic_path, write_json  # noqa: E402
from opcost.ops.memory import CpuPeak, footprint, measure_cpu_peak  # noqa: E402
from opcost.ops.netspec import NetSpec, build_model, make_inputs, trace_network  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.progress import progress_bar  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.10

# (model, inputs, model args, modes): small batches so the whole run takes minutes on 2 cores.
NETWORKS = [
    ("resnet18", ["float32:4,3,224,224"], {}, ("inference", "training")),
    ("resnet50", ["float32:2,3,224,224"], {}, ("inference", "training")),
    ("mobilenet_v3_large", ["float32:4,3,224,224"], {}, ("inference", "training")),
    ("efficientnet_b0", ["float32:2,3,224,224"], {}, ("inference", "training")),
    ("vit_b_16", ["float32:2,3,224,224"], {}, ("inference", "training")),
    ("fcn_resnet50", ["float32:1,3,224,224"], {}, ("inference", "training")),
    ("fasterrcnn_mobilenet_v3_large_320_fpn", ["float32:1,3,320,320"], {}, ("inference",)),
    ("r3d_18", ["float32:1,3,8,112,112"], {}, ("inference", "training")),
    ("hf:GPT2LMHeadModel", ["int64:2,128"], {}, ("inference", "training")),
    ("hf:bert", ["int64:2,128"], {}, ("inference", "training")),
    ("hf:vit", ["float32:2,3,224,224"], {}, ("inference", "training")),
]
QUICK = {"resnet18", "hf:bert"}


def measured_peak(net: NetSpec, mode: str, optimizer: str | None) -> CpuPeak:
    """The CPU allocator's peak for the step, on the network built with seeded random weights."""
    loaded = build_model(net, meta=False, seed=0)
    args, kwargs = make_inputs(loaded, "cpu", seed=0)
    return measure_cpu_peak(loaded.module, args, kwargs, mode, optimizer)


def predicted(net: NetSpec, mode: str, optimizer: str | None) -> dict:
    traced = trace_network(net, mode)
    fp = footprint(traced.loaded.module, traced.args, traced.kwargs, mode, optimizer)
    return {**fp.to_json(), "traced_on": traced.device}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Two networks only (a smoke run).")
    ap.add_argument("--out", type=Path, default=Paths(ROOT).bench_report("memory_validation.json"))
    ap.add_argument("--table", type=Path, default=ROOT / "reports" / "memory_validation.md")
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    jobs = []
    for model, inputs, margs, modes in NETWORKS:
        if a.quick and model not in QUICK:
            continue
        net = NetSpec.make(model, inputs, margs)
        for mode in modes:
            for opt in (None,) if mode == "inference" else ("sgd", "adam"):
                jobs.append((net, mode, opt))
    rows = []
    with progress_bar(True) as progress:
        task = progress.add_task("memory validation", total=len(jobs))
        for net, mode, opt in jobs:
            progress.update(task, description=f"{net.label} {mode} {opt or ''}")
            p = predicted(net, mode, opt)
            m = measured_peak(net, mode, opt)
            err = (p["peak_raw_bytes"] - m["peak_bytes"]) / m["peak_bytes"]
            rows.append(
                {
                    "network": net.label,
                    "inputs": net.input_text,
                    "mode": mode,
                    "optimizer": opt,
                    "predicted_bytes": p["peak_raw_bytes"],
                    "predicted_cuda_allocated_bytes": p["peak_bytes"],
                    "measured_bytes": m["peak_bytes"],
                    "error": err,
                    "within_goal": abs(err) <= GOAL,
                    "prediction": p,
                    "measurement": m,
                }
            )
            progress.advance(task)
    errs = [abs(r["error"]) for r in rows]
    report = {
        "goal_abs_error": GOAL,
        "method": "CPU allocator events (torch.profiler profile_memory=True) + pre-existing storages",
        "torch": torch.__version__,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "networks": len({r["network"] for r in rows}),
        "max_abs_error": max(errs),
        "mean_abs_error": sum(errs) / len(errs),
        "all_within_goal": all(r["within_goal"] for r in rows),
        "rows": rows,
    }
    write_json(report, a.out)
    lines = [
        "# Memory footprint: predicted vs measured (CPU)",
        "",
        "Written by `bench/memory_validation.py`. Predicted: the meta-device trace of `opcost.ops.memory`",
        "(sizes as requested; the CUDA figure rounds blocks to 512 B). Measured: the CPU allocator's peak",
        "for the same step (torch.profiler `profile_memory=True` events plus the storages that exist",
        "before the step). Training = forward, sum loss, backward, optimizer step (foreach), steady state.",
        "",
        "| network | inputs | mode | optimizer | predicted [MiB] | CUDA-rounded [MiB] | measured [MiB] | error |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['network']} | {r['inputs']} | {r['mode']} | {r['optimizer'] or '-'} | "
            f"{r['predicted_bytes'] / 2**20:.1f} | {r['predicted_cuda_allocated_bytes'] / 2**20:.1f} | "
            f"{r['measured_bytes'] / 2**20:.1f} | {r['error']:+.1%} |"
        )
    lines += [
        "",
        f"{sum(r['within_goal'] for r in rows)}/{len(rows)} within +/-{GOAL:.0%}; "
        f"mean |error| {report['mean_abs_error']:.1%}, max {report['max_abs_error']:.1%}.",
        "",
    ]
    with atomic_path(a.table) as tmp:
        Path(tmp).write_text("\n".join(lines))
    print("\n".join(lines[8:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
