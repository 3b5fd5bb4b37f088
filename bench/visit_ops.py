"""The ops a GPU visit measures: per thesis network and mode, the fewest ops that carry half of its time.

Time is the A30's measured op time (data/evaluated/operations.parquet, the thesis logs) times the op's calls
in the network (data/operations/occurrences.parquet). Per network and mode the ops are ranked by that time
and taken until they carry `--share` of the network's op time; the union per mode is the visit's op list
(params.yaml profile.campaigns.visit-h200.op_ids, as ID@mode). Why half: on an H100-class card an op costs
about a second of device time (two trials, timing, a counter-sized energy window), so the ops that carry
half of every thesis network fit in a visit of at most 8 minutes with the networks themselves.

    PYTHONPATH=src python bench/visit_ops.py [--share 0.5] [--yaml]
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

import benchreport
from opcost.paths import Paths


def select(share: float) -> tuple[dict[str, list[str]], pd.DataFrame]:
    """{mode: op ids} and the coverage per (set, mode): the share of the network's A30 op time they carry."""
    paths = Paths(benchreport.ROOT)
    occ = pd.read_parquet(paths.occurrences)
    ops = pd.read_parquet(paths.evaluated_operations)
    a30 = ops[(ops["device_config"] == "A30") & ops["clock_mhz"].isna()][["op_id", "mode", "t_s"]]
    m = occ.merge(a30, on=["op_id", "mode"])
    m["time"] = m["t_s"] * m["calls"]
    m["share"] = m["time"] / m.groupby(["set_id", "mode"])["time"].transform("sum")
    chosen: dict[str, set[str]] = {}
    for (_, mode), g in m.groupby(["set_id", "mode"], sort=True):
        g = g.sort_values(["share", "op_id"], ascending=[False, True])
        k = int((g["share"].cumsum() < share).sum()) + 1
        chosen.setdefault(str(mode), set()).update(g["op_id"].iloc[:k])
    picked = pd.concat([m[(m["mode"] == md) & m["op_id"].isin(ids)] for md, ids in chosen.items()])
    coverage = picked.groupby(["set_id", "mode"])["share"].sum().reset_index()
    return {md: sorted(ids) for md, ids in sorted(chosen.items())}, coverage


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--yaml", action="store_true", help="print the op_ids list for params.yaml")
    a = ap.parse_args()
    chosen, coverage = select(a.share)
    if a.yaml:
        for mode, ids in chosen.items():
            for i in ids:
                print(f'        - "{i}@{mode}"')
        return 0
    report = {
        "share": a.share,
        "ops_per_mode": {md: len(ids) for md, ids in chosen.items()},
        "coverage_median": float(coverage["share"].median()),
        "coverage_min": float(coverage["share"].min()),
        "coverage": [
            {"set_id": r.set_id, "mode": r.mode, "share": float(r.share)} for r in coverage.itertuples(index=False)
        ],
        "op_ids": chosen,
    }
    return benchreport.save(report, "visit_ops.json")


if __name__ == "__main__":
    sys.exit(main())
