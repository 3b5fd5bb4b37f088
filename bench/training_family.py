"""Where the family-out error of the training targets comes from, with and without model/basis/backward.py.

For each target and (algorithm, feature set): the grouped and family split scored as `train` scores them
(model/training/fit.py cross_validate), as main has it (`main`: no training baselines, TargetData.dw_work and
mm_work left out), with the depthwise baseline only (`backward_dw`) and with both (`backward`). Per
(held-out family, kind): bias, MAPE, share of the held-out time and share of the time-weighted error
(sum |error| of the cell over the held-out time: the cells that make the twe).
Depthwise convolutions are their own kind.

    PYTHONPATH=src python bench/training_family.py [--targets A30-training,...] [--models xgb-improved,...]
        [--splits family,grouped]

Needs `dvc pull` (data/evaluated/targets/). Writes reports/bench/training_family.json (merged per target).
About a minute per (target, model, split) on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opcost.io import write_report  # noqa: E402
from opcost.model.training import fit  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages.train import read_target  # noqa: E402

MIN_TWE_SHARE = 0.5  # % of the held-out time: cells below it are left out of the listing
OUT = Paths(ROOT).bench_report("training_family.json")


def cells(data: fit.TargetData, r: dict[str, Any], tp: TrainParams) -> list[dict[str, Any]]:
    """Per (held-out family, kind): n, share of time, MAPE, twe, bias (geometric), share of the total twe."""
    fam: list[str] = []
    for name, _, te in fit.folds_of(data, "family", tp):
        fam += [name] * int((fit._ok(data, "time")[te] & ~data.estimated[te]).sum())
    rows = r["rows"]
    d = pd.DataFrame({"kind": data.df["kind"].to_numpy()[rows], "y": r["measured"], "p": r["predicted"], "fam": fam})
    d["kind"] = np.where(data.depthwise[rows], d["kind"] + " (depthwise)", d["kind"])
    total = d["y"].sum()
    out = []
    for (f, k), g in d.groupby(["fam", "kind"]):
        ae = (g["p"] - g["y"]).abs()
        out.append({
            "family": f, "kind": k, "n": int(len(g)),
            "time_share_pct": round(100 * g["y"].sum() / total, 2),
            "twe_share_pct": round(100 * ae.sum() / total, 2),
            "mape": round(100 * float((ae / g["y"]).mean()), 2),
            "twe": round(100 * float(ae.sum() / g["y"].sum()), 2),
            "bias_pct": round(100 * float(np.expm1(np.log(g["p"] / g["y"]).mean())), 2),
        })  # fmt: skip
    return sorted((c for c in out if c["twe_share_pct"] >= MIN_TWE_SHARE), key=lambda c: -c["twe_share_pct"])


def score(r: dict[str, Any]) -> dict[str, float]:
    return {k: round(100 * r[k], 2) for k in ("mape", "mdape", "twe")} | {"r2": round(r["r2"], 4), "n": int(r["n"])}


def run(target: str, models: list[str], splits: list[str], tp: TrainParams) -> dict[str, Any]:
    device, mode = TrainParams.split_target(target)
    df, _, _ = read_target(Paths(ROOT), target)
    with_bw = fit.prepare(df, mode, device)
    without = fit.TargetData(**{**with_bw.__dict__, "dw_work": None, "mm_work": None})
    assert with_bw.mm_work is not None
    dw_only = fit.TargetData(**{**with_bw.__dict__, "mm_work": np.zeros_like(with_bw.mm_work)})
    out: dict[str, Any] = {}
    for m in models:
        alg, fs = m.split("-")
        for label, data in (("main", without), ("backward_dw", dw_only), ("backward", with_bw)):
            for s in splits:
                t0 = time.time()
                r = fit.cross_validate(data, alg, fs, "time", s, tp)
                out.setdefault(m, {}).setdefault(label, {})[s] = score(r)
                if s == "family":
                    out[m][label]["family_cells"] = cells(data, r, tp)
                print(f"{target} {m} {label} {s}: {score(r)} [{time.time() - t0:.0f} s]", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default="A30-training,RTX2080Ti-training")
    ap.add_argument("--models", default="xgb-improved,xgb-physical")
    ap.add_argument("--splits", default="family,grouped")
    args = ap.parse_args()
    tp: TrainParams = load_params(Paths(ROOT).params).train
    report = json.loads(OUT.read_text()) if OUT.exists() else {}
    for t in args.targets.split(","):
        report.setdefault(t, {}).update(run(t, args.models.split(","), args.splits.split(","), tp))
        write_report(report, OUT)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
