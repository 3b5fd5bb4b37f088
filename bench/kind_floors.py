"""Per-kind launch floors in the op time models' offset (data/floors.py): with and without, per target.

Runs the time model `train@<target>` chose (reports/train/targets/<target>.json) through model/training/fit.py's
cross-validation on the grouped and the family split three ways: with no kind floors (every op at the
device floor, as before round 34), as shipped (kind floors in inference only: floors.KIND_FLOOR_MODES),
and with kind floors in every mode. Prints and writes MAPE and time-weighted error per target, split and
variant, and the shipped kind floors learnt from all of a target's rows.

    PYTHONPATH=src python bench/kind_floors.py [--targets A30-inference,...] [--model xgb-physical]

Needs `dvc pull` (data/evaluated/targets/, reports/train/targets/). About a minute on two cores.
Writes reports/bench/kind_floors.json; with --model (one algorithm-feature set for every target instead
of each target's chosen one) reports/bench/kind_floors_<model>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import benchreport  # noqa: E402
from opcost.data import floors  # noqa: E402
from opcost.model.training import fit  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages.train import read_target  # noqa: E402

VARIANTS = {"none": (), "shipped": floors.KIND_FLOOR_MODES, "every mode": ("inference", "training")}


def chosen_time_model(paths: Paths, target: str) -> tuple[str, str]:
    """(algorithm, feature set) of the time model the train stage chose for `target`."""
    report = json.loads((paths.root / "reports" / "train" / "targets" / f"{target}.json").read_text())[target]
    alg, fs = str(report["chosen"]["time"]).split("-", 1)
    return alg, fs


def run_target(paths: Paths, tp: TrainParams, target: str, model: str | None = None) -> dict[str, Any]:
    device, mode = TrainParams.split_target(target)
    df, _, _ = read_target(paths, target)
    data = fit.prepare(df, mode, device)
    alg, fs = model.split("-", 1) if model else chosen_time_model(paths, target)
    out: dict[str, Any] = {"model": f"{alg}-{fs}"}
    shipped = floors.KIND_FLOOR_MODES
    try:
        for name, modes in VARIANTS.items():
            floors.KIND_FLOOR_MODES = modes
            out[name] = {}
            for split in ("grouped", "family"):
                r = fit.cross_validate(data, alg, fs, "time", split, tp)
                out[name][split] = {"mape": round(100 * r["mape"], 2), "twe": round(100 * r["twe"], 2)}
    finally:
        floors.KIND_FLOOR_MODES = shipped
    every = np.arange(data.n)
    fitted = fit.fit_model(data, alg, fs, "time", every, tp)
    out["device_floor_us"] = round(fitted.floor * 1e6, 2)
    out["kind_floors_us"] = {k: round(v * 1e6, 2) for k, v in fitted.kind_floors}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", help="comma-separated train targets (default: params.yaml's)")
    ap.add_argument("--model", help="algorithm-feature set for every target (default: each target's chosen one)")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    targets = args.targets.split(",") if args.targets else list(tp.targets)
    report = {}
    for t in targets:
        report[t] = r = run_target(paths, tp, t, args.model)
        line = "; ".join(f"{v}: " + ", ".join(f"{s} {r[v][s]['mape']:.1f}/{r[v][s]['twe']:.1f}" for s in r[v])
                         for v in VARIANTS)  # fmt: skip
        print(f"{t} ({r['model']}, MAPE/twe %): {line}", flush=True)
    return benchreport.save(report, f"kind_floors_{args.model}.json" if args.model else "kind_floors.json")


if __name__ == "__main__":
    sys.exit(main())
