"""How linear time is in iterations over an energy window, on this machine as it is now.

The unit tests only check the window's structure: its R^2 depends on what else the machine runs
(a busy 2-core machine once gave 0.44 where an idle one gives > 0.99). This records the figure,
with the load average beside it, for a small convolution on the CPU at a few window lengths.

    PYTHONPATH=src python bench/window_linearity.py [--repeats 5]

Writes reports/bench/window_linearity.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from torch import nn  # noqa: E402

from opcost.io import write_json  # noqa: E402
from opcost.measure.timing import R2_MIN, measure_window, time_block  # noqa: E402
from opcost.measure.workload import blocks_for, op_workload  # noqa: E402
from opcost.ops.spec import CATEGORY_MODULE, OpSpec, TensorInput, module_attrs, target_of_class  # noqa: E402
from opcost.paths import Paths  # noqa: E402


def conv_spec() -> OpSpec:
    m = nn.Conv2d(8, 8, 3, padding=1)
    return OpSpec(
        kind="Conv2d",
        category=CATEGORY_MODULE,
        target=target_of_class(type(m)),
        attrs=module_attrs(m),
        args=[{"tensor": 0}],
        inputs=(TensorInput((2, 8, 16, 16), "float32"),),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Paths(ROOT).bench_report("window_linearity.json"))
    args = ap.parse_args()
    wl = op_workload(conv_spec(), "inference", "cpu", seed=1, max_instances=4, budget_bytes=1e9)
    block_s = time_block(wl.block, wl.instances, 0.05).stats()["mean_s"] * wl.instances
    load_before = os.getloadavg()
    rows = []
    for window_s in (0.05, 0.2, 1.0):
        r2s = []
        for _ in range(args.repeats):
            per_chunk = blocks_for(window_s, block_s, 5)
            w = measure_window(wl.block, wl.instances, per_chunk, 5, lambda: None, lambda: None)
            r2s.append(w.fit("time")[0])
        rows.append(
            {
                "window_s": window_s,
                "r2_min": min(r2s),
                "r2_median": statistics.median(r2s),
                "share_at_least_r2_min": sum(r >= R2_MIN for r in r2s) / len(r2s),
            }
        )
    result = {
        "what": "R^2 of time vs iterations over a 5-chunk window, Conv2d 8->8 3x3 on 2x8x16x16, CPU",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "r2_threshold": R2_MIN,
        "windows": rows,
    }
    write_json(result, args.out)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
