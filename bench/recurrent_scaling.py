"""Recurrent scaling on real measurements: does cost by sequential steps get seq-len and layer scaling right?

The `cpu-rnn` campaign (params.yaml) measures the LSTM, GRU and RNN layers of the networks/recurrent.py
sets of sets.yaml on this CPU: 16, 64 and 256 steps at one layer, 1, 2 and 4 layers at 64 steps, one
and two directions. Every pair of configurations that differ in one factor gives a measured time
ratio; src/opcost/validate/recurrent.py says what each costing scheme predicts for it (cost by steps,
in proportion to kernels or FLOPs, one op). `by_steps`, the costing's form with a per-kernel and a
per-FLOP cost, is fitted per mode on the one-layer, one-direction configurations only, so its layer and
direction ratios are out of sample; `by_steps_call` adds a cost once per call, fitted the same way.
Each layer's time is the least of its trials' means (on shared cores contention only adds time).
Measured single-threaded (the cpu-rnn campaign's `threads: 1` in params.yaml) where the cores are
shared: two threads on two busy cores wait on each other, and times of one layer then spread over 50x between trials.

    .venv/bin/python bench/recurrent_scaling.py

Needs `dvc repro profile@cpu-rnn` first (it reads data/raw/cpu-rnn/timings.parquet and the extract
tables). Writes reports/bench/recurrent_scaling.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opcost.io import write_report  # noqa: E402
from opcost.ops.spec import OpSpec  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.validate.recurrent import RecurrentRow, fit_step_cost, is_recurrent, scaling_pairs, summarize  # noqa: E402

CAMPAIGN = "cpu-rnn"


def measured_rows(paths: Paths) -> list[RecurrentRow]:
    """One row per recurrent op and mode: its spec, parts, FLOPs and the least of its ok trials' mean times."""
    timings = pd.read_parquet(paths.raw_dir(CAMPAIGN) / "timings.parquet")
    ops = pd.read_parquet(paths.operations).set_index("op_id")
    occ = pd.read_parquet(paths.occurrences)
    ok = timings[(timings["status"] == "ok") & timings["kind"].map(is_recurrent)]
    rows = []
    for (op_id, mode), g in ok.groupby(["op_id", "mode"], sort=True):
        op = ops.loc[op_id]
        spec = OpSpec.from_json(json.loads(op["spec_json"]))
        sets = occ[(occ["op_id"] == op_id) & (occ["mode"] == mode)]["set_id"]
        rows.append(
            RecurrentRow(
                set_id=str(sets.iloc[0]) if len(sets) else str(op_id),
                kind=spec.kind,
                mode=str(mode),
                hp=dict(spec.attrs),
                input_shape=tuple(spec.inputs[0].shape),
                flops=float(op["flops"]),
                parts=json.loads(op["parts_json"]),
                t_s=float(g["mean_s"].min()),  # the quickest trial: sharing the cores only ever adds time
            )
        )
    return rows


def main() -> int:
    paths = Paths(ROOT)
    if not (paths.raw_dir(CAMPAIGN) / "timings.parquet").is_file():
        print(
            f"no {paths.raw_dir(CAMPAIGN)}/timings.parquet: run `dvc repro profile@{CAMPAIGN}` first", file=sys.stderr
        )
        return 2
    rows = measured_rows(paths)
    pairs: list[dict] = []
    fits = {}
    for mode in sorted({r.mode for r in rows}):
        these = [r for r in rows if r.mode == mode]
        base = [r for r in these if r.layers == 1 and r.directions == 1]
        cost = fit_step_cost(base)
        call = fit_step_cost(base, per_call=True)
        fits[mode] = {
            "by_steps": {"per_kernel_s": cost[0], "per_flop_s": cost[1]},
            "by_steps_call": {"per_kernel_s": call[0], "per_flop_s": call[1], "per_call_s": call[2]},
            "fitted_on": [r.set_id for r in base],
        }
        pairs += scaling_pairs(these, cost, call)
    report = {
        "campaign": CAMPAIGN,
        "source": "measured (this CPU) vs predicted ratios",
        "device": "cpu",
        "layers_measured": [
            {
                "set_id": r.set_id,
                "mode": r.mode,
                "kind": r.kind,
                "steps": r.steps,
                "kernels": r.kernels,
                "flops": r.flops,
                "t_s": r.t_s,
            }
            for r in rows
        ],
        "by_steps_fit": fits,
        "summary": summarize(pairs),
        "pairs": pairs,
    }
    write_report(report, paths.bench_report("recurrent_scaling.json"))
    for factor, s in report["summary"].items():
        cols = ", ".join(
            f"{k} {v['median_abs_pct']:.1f}% (max {v['max_abs_pct']:.1f}%)" for k, v in s.items() if k != "pairs"
        )
        print(f"{factor} ({s['pairs']} pairs), median |ratio error|: {cols}")
    for p in pairs:
        print(
            f"{p['mode']:9s} {p['factor']:10s} {p['from']} -> {p['to']}: measured x{p['measured_ratio']:.2f}, "
            f"steps x{p['steps_ratio']:.2f}, by_steps x{p['by_steps_ratio']:.2f}, "
            f"by_steps_call x{p['by_steps_call_ratio']:.2f}, flops x{p['flops_ratio']:.2f}"
        )
    return 0 if np.isfinite([p["measured_ratio"] for p in pairs]).all() else 1


if __name__ == "__main__":
    sys.exit(main())
