"""Stage `train-report`: the headline scores of every train target in one DVC metrics file.

reports/train/metrics.json holds, per target, the chosen time and power models with their mean
cross-validated R^2 and MAPE: few enough columns for `dvc metrics show` and `dvc exp show`. The
full detail (every algorithm x feature set) stays in reports/train/targets/<target>.json, which is
not declared as metrics.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opcost.config import Params, Paths
from opcost.io import write_json
from opcost.stages._run import execute
from opcost.tables import require


def headline(detail: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in ("time", "power"):
        if q in detail:
            alg, fs = detail[q]["chosen"].split("-")
            s = detail[q][alg][fs]
            out[q] = {"model": detail[q]["chosen"], "cv_r2": s["cv_r2_mean"], "cv_mape": s["cv_mape_mean"]}
    return out


def run(paths: Paths, params: Params) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for t in params.train.targets:
        detail = json.loads(require(paths.train_metrics(t), f"train@{t}").read_text())[t]
        merged[t] = headline(detail)
    write_json(merged, paths.train_metrics())
    return merged


def summary(merged: dict[str, Any]) -> str:
    return f"train-report: {len(merged)} targets"


def main(argv: list[str] | None = None) -> int:
    return execute(argv, __doc__.splitlines()[0], lambda p: None, lambda paths, params, a: run(paths, params), summary)


if __name__ == "__main__":
    sys.exit(main())
