"""Cross-device op model with the thesis' host-bound wall-clock rows left out (xdevice.host_bound), at
several plateau factors: how much the leave-one-GPU-out network figures depend on the factor.

The shipped factor (params.yaml xdevice.host_plateau_factor, 2) was set before this bench was written, as
the conservative one of the three in the first comparison (1.25 / 1.5 / 2); this bench shows the
sensitivity, it does not choose. `none` is the model without the rule (every wall-clock row kept), the
no-op rows still left out (xdevice.thesis_ops).

    PYTHONPATH=src python bench/xdevice_host_plateau.py

Needs `dvc pull`. About 25 s per factor on two cores. Writes reports/bench/xdevice_host_plateau.json.
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

FACTORS = (1.25, 1.5, 2.0, 3.0)
NO_RULE = 1e-9  # t <= 1e-9 x plateau: no row is host-bound


def main() -> int:
    paths = Paths(ROOT)
    params = load_params(paths.params)
    rows = stage.op_rows(paths, params)
    nets, nodes = stage.net_rows(paths, params)
    report: dict[str, Any] = {"shipped_factor": params.xdevice.host_plateau_factor}
    for name, factor in (("none", NO_RULE), *((f"x{f:g}", f) for f in FACTORS)):
        p = dataclasses.replace(params.xdevice, host_plateau_factor=factor)
        folds: dict[str, xdevice.OpModel] = {}
        xdevice.leave_one_gpu_out(rows, p, on_fold=folds.__setitem__)
        held = xdevice_net.logo_networks(nets, nodes, folds)
        report[name] = {
            "host_bound_rows": int(xdevice.host_bound(rows, factor).sum()),
            "networks": {k: stage.net_scores(g) for k, g in (("all", held), *held.groupby("set"))},
            "networks_by_gpu": {str(g): stage.net_scores(d) for g, d in held.groupby("gpu")},
        }
        by = ", ".join(f"{g} {v['mape']:.1f}" for g, v in report[name]["networks_by_gpu"].items())
        print(f"{name}: {report[name]['host_bound_rows']} rows left out; networks MAPE "
              f"{report[name]['networks']['all']['mape']:.1f} %; {by}", flush=True)  # fmt: skip
    return benchreport.save(report, "xdevice_host_plateau.json")


if __name__ == "__main__":
    sys.exit(main())
