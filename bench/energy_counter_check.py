"""Check a GPU's NVML energy counter against integrated instant power on a constant load.

    PYTHONPATH=src python bench/energy_counter_check.py --device cuda:0 --seconds 10

Writes reports/bench/energy_counter_check.json. Reads the card as it is; changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opcost.io import write_json
from opcost.measure.energycheck import energy_check
from opcost.measure.nvml import Nvml
from opcost.paths import Paths, find_root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device on this machine: run this where the GPU is", file=sys.stderr)
        return 2
    index = int(args.device.split(":")[1]) if ":" in args.device else 0
    nvml = Nvml(index)
    try:
        result = energy_check(nvml, args.device, args.seconds, args.size)
    finally:
        nvml.close()
    out = args.out or Paths(find_root()).bench_report("energy_counter_check.json")
    write_json(result, out)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
