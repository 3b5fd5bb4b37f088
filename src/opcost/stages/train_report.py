"""Stage `train-report`: the headline scores of every train target in one DVC metrics file.

reports/train/metrics.json holds, per target, ten out-of-sample figures (see `headline`): few
enough columns for `dvc metrics show` and `dvc exp show`. The full detail (every algorithm x
feature set x split, per kind, the composition layer) stays in reports/train/targets/<target>.json,
which is not declared as metrics.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opcost.io import write_report
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.stages._run import execute
from opcost.tables import require


def headline(detail: dict[str, Any]) -> dict[str, Any]:
    """Ten figures per target, all out of sample: the chosen time model's grouped-split MAPE,
    median error, time-weighted error and R^2 and its family-left-out MAPE; the chosen power model's
    grouped MAPE; the networks' time and energy MAPE with their whole model held out, and the 90 %
    time intervals' coverage and median width under that split (where it has networks; the family
    split and energy intervals are in the target's detail)."""
    out: dict[str, Any] = {}
    for q, keys in (("time", ("mape", "mdape", "twe", "r2")), ("power", ("mape",))):
        if q not in detail["chosen"]:
            continue
        alg, fs = detail["chosen"][q].split("-")
        s = detail["ops"][q][alg][fs]
        out[q] = {f"{k}_pct" if k != "r2" else k: _pct(s["grouped"][k], k) for k in keys}
        if q == "time":
            out[q]["family_mape_pct"] = _pct(s["family"]["mape"], "mape")
    s = detail["networks"].get("model", {})  # model left out: the headline network figure
    if s.get("networks"):
        out["networks"] = {f"{q}_mape_pct": s[q]["mape_pct"] for q in ("time", "energy") if q in s}
        iv = s.get("interval", {}).get("time")
        if iv:
            out["networks"] |= {"time_interval_coverage_pct": iv["coverage_pct"],
                                "time_interval_width_pct": iv["median_width_pct"]}  # fmt: skip
    return out


def _pct(v: float | None, key: str) -> float | None:
    return v if v is None or key == "r2" else 100.0 * v


def run(paths: Paths, params: Params) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for t in params.train.targets:
        detail = json.loads(require(paths.train_metrics(t), f"train@{t}").read_text())[t]
        merged[t] = headline(detail)
    write_report(merged, paths.train_metrics())
    return merged


def summary(merged: dict[str, Any]) -> str:
    return f"train-report: {len(merged)} targets"


def main(argv: list[str] | None = None) -> int:
    return execute(argv, __doc__.splitlines()[0], lambda p: None, lambda paths, params, a: run(paths, params), summary)


if __name__ == "__main__":
    sys.exit(main())
