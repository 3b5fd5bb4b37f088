"""Family-out op time error per target, feature set and op kind (issue 21, section 4).

Runs exactly what `train@<target>` runs for the time models (model/training/fit.py: prepare, cross_validate)
on the grouped and the family split, for the `improved` feature set (today's champion everywhere)
and the `physical` one (improved + model/basis/gemm.py's depthwise baseline), both algorithms. The model
`train` would choose (lowest grouped-split time-weighted error over these four) is reported with
its family-split MAPE, median APE, time-weighted error and R², and per op kind and per (held-out
family, kind) where it carries at least 1 % of the held-out time: where the family error comes from.
The baseline (thesis) encoding is left out to save time: it never wins the grouped split.

    PYTHONPATH=src python bench/family_split.py [--targets A30-inference,...] [--algorithms rf,xgb]

Needs `dvc pull` (data/evaluated/targets/). Writes reports/bench/family_split.json. Several minutes on
two cores (the six targets x 2 algorithms x 2 feature sets x 2 splits).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import benchreport  # noqa: E402
from opcost.model.training import fit  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages.train import read_target  # noqa: E402

FEATURE_SETS = ("improved", "physical")
KEYS = ("mape", "mdape", "twe", "r2")
MIN_SHARE = 0.01


def pct(r: dict[str, Any]) -> dict[str, float]:
    return {k: round(100 * r[k], 2) if k != "r2" else round(r[k], 4) for k in KEYS} | {"n": int(r["n"])}


def breakdown(data: fit.TargetData, r: dict[str, Any], tp: TrainParams) -> tuple[dict, list[dict]]:
    """Errors per kind, and per (held-out family, kind) with at least MIN_SHARE of the held-out time."""
    fam: list[str] = []
    for name, _, te in fit.folds_of(data, "family", tp):
        fam += [name] * int((fit._ok(data, "time")[te] & ~data.estimated[te]).sum())
    d = data.df.iloc[r["rows"]][["kind"]].assign(y=r["measured"], p=r["predicted"], fam=fam)
    d["dw"] = data.depthwise[r["rows"]] if data.depthwise is not None else False
    d["kind"] = np.where(d["dw"], d["kind"] + " (depthwise)", d["kind"])
    total = d["y"].sum()

    def figures(g: pd.DataFrame) -> dict[str, float]:
        ae = (g["p"] - g["y"]).abs()
        return {
            "n": int(len(g)),
            "time_share_pct": round(100 * g["y"].sum() / total, 2),
            "mape": round(100 * float((ae / g["y"]).mean()), 2),
            "twe": round(100 * float(ae.sum() / g["y"].sum()), 2),
            "bias_pct": round(100 * float(np.expm1(np.log(g["p"] / g["y"]).mean())), 2),
        }

    per_kind = {str(k): figures(g) for k, g in d.groupby("kind")}
    per_fam = [{"family": f, "kind": k, **figures(g)} for (f, k), g in d.groupby(["fam", "kind"])]
    per_fam = sorted((x for x in per_fam if x["time_share_pct"] >= 100 * MIN_SHARE), key=lambda x: -x["time_share_pct"])
    return per_kind, per_fam


def run_target(paths: Paths, tp: TrainParams, target: str, algorithms: tuple[str, ...]) -> dict[str, Any]:
    device, mode = TrainParams.split_target(target)
    df, _, _ = read_target(paths, target)
    data = fit.prepare(df, mode, device)
    res = {(a, fs, s): fit.cross_validate(data, a, fs, "time", s, tp)
           for a in algorithms for fs in FEATURE_SETS for s in fit.SPLITS}  # fmt: skip
    scores = {f"{a}-{fs}": {s: pct(res[(a, fs, s)]) for s in fit.SPLITS} for a in algorithms for fs in FEATURE_SETS}
    today = min((a for a in algorithms), key=lambda a: res[(a, "improved", "grouped")]["twe"])
    chosen = min(((a, fs) for a in algorithms for fs in FEATURE_SETS), key=lambda k: res[(*k, "grouped")]["twe"])
    out: dict[str, Any] = {"scores": scores, "today": f"{today}-improved", "chosen": "-".join(chosen)}
    for label, key in (("today", (today, "improved")), ("chosen", chosen)):
        kinds, fams = breakdown(data, res[(*key, "family")], tp)
        out[f"{label}_family_by_kind"], out[f"{label}_family_by_family_kind"] = kinds, fams
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", help="comma-separated train targets (default: params.yaml's)")
    ap.add_argument("--algorithms", default="rf,xgb")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    targets = args.targets.split(",") if args.targets else list(tp.targets)
    algorithms = tuple(args.algorithms.split(","))
    report: dict[str, Any] = {}
    for t in targets:
        t0 = time.time()
        report[t] = run_target(paths, tp, t, algorithms)
        r = report[t]
        a, b = r["scores"][r["today"]]["family"], r["scores"][r["chosen"]]["family"]
        print(
            f"{t}: family left out, today {r['today']} MAPE {a['mape']:.1f} % twe {a['twe']:.1f} % -> "
            f"chosen {r['chosen']} MAPE {b['mape']:.1f} % twe {b['twe']:.1f} % (median {b['mdape']:.1f} %, "
            f"R2 {b['r2']:.3f}) [{time.time() - t0:.0f} s]",
            flush=True,
        )
    return benchreport.save(report, "family_split.json")


if __name__ == "__main__":
    sys.exit(main())
