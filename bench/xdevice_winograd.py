"""Cross-device op model with and without its Winograd feature (`winograd_fp32`: a 3x3, stride-1,
undilated, ungrouped convolution on the FP32 units), leave-one-GPU-out, at three seeds of the trees.

Why three seeds: XGBoost subsamples rows and columns, and one GPU's network MAPE moves by up to 6 points
between seeds with nothing else changed; a feature is judged by what holds at every seed.

    PYTHONPATH=src python bench/xdevice_winograd.py

Needs `dvc pull`. About six minutes on two cores. Writes reports/bench/xdevice_winograd.json.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import benchreport  # noqa: E402
from opcost.model.crossdevice import xdevice, xdevice_net  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages import train_xdevice as stage  # noqa: E402

SEEDS = (0, 1, 2)


def main() -> int:
    paths = Paths(ROOT)
    params = load_params(paths.params)
    rows, (nets, nodes) = stage.op_rows(paths, params), stage.net_rows(paths, params)
    report: dict[str, Any] = {}
    for seed in SEEDS:
        p = dataclasses.replace(params.xdevice, seed=seed)
        for name, off in (("without", True), ("with", False)):
            r, nd = (rows.assign(winograd=0.0), nodes.assign(winograd=0.0)) if off else (rows, nodes)
            folds: dict[str, xdevice.OpModel] = {}
            pred = xdevice.leave_one_gpu_out(r, p, on_fold=folds.__setitem__)
            table = xdevice.logo_table(pred)
            held = xdevice_net.logo_networks(nets, nd, folds)
            conv = table[(table["group"] == "conv") & (table["gpu"] != "all")]
            report[f"seed {seed}, {name}"] = {
                "networks": {k: stage.net_scores(g) for k, g in (("all", held), *held.groupby("set"))},
                "networks_by_gpu": {str(g): stage.net_scores(d) for g, d in held.groupby("gpu")},
                "conv_ops_mape_by_gpu": {str(x.gpu): float(x.mape) for x in conv.itertuples()},
            }
            v = report[f"seed {seed}, {name}"]
            by = ", ".join(f"{g} {s['mape']:.1f}" for g, s in v["networks_by_gpu"].items())
            print(f"seed {seed} {name}: networks {v['networks']['all']['mape']:.1f} %; {by}", flush=True)
    return benchreport.save(report, "xdevice_winograd.json")


if __name__ == "__main__":
    sys.exit(main())
