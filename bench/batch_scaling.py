"""Batch scaling on real measurements: do op models trained at one batch size predict others?

All reference GPU data is at batch 32, so nothing there can show how predictions scale with batch.
The CPU is a device this project can measure: the `cpu-smoke` (batch 32) and `cpu-batch` (batch 8
and 128) campaigns measure resnet18's ops and the whole network at three batch sizes. This script
trains time models as `train` does (model/training/fit.py with params.yaml's settings; XGBoost and random
forest on the improved features, the GPU targets' champions) on the batch-32 rows only, then
predicts the ops and the networks at batch 8 and 128, which the models never saw, and says whether
the prediction flags itself as an extrapolation.

    PYTHONPATH=src python bench/batch_scaling.py [--target AMD_EPYC-inference]

Needs `dvc repro` (or `dvc pull`) first: it reads data/evaluated/targets/<cpu target>/. Writes
reports/bench/batch_scaling.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opcost.devices import find_device  # noqa: E402
from opcost.io import write_report  # noqa: E402
from opcost.model.composition import compose  # noqa: E402
from opcost.model.composition.extrapolation import extrapolation_warnings, op_ranges  # noqa: E402
from opcost.model.training import netval  # noqa: E402
from opcost.model.training.fit import final_model, prepare  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.train import TrainParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.schemas import TARGET_NETWORK_OPS, TARGET_NETWORKS, TARGET_OPERATIONS  # noqa: E402
from opcost.tables import read_table  # noqa: E402

TRAIN_BATCH = 32


def cpu_target(paths: Paths) -> str | None:
    """The inference target of a device the device table does not know (the measuring host)."""
    for d in sorted(paths.evaluated_targets_dir.glob("*-inference")):
        device = d.name.rpartition("-")[0]
        if find_device(device) is None:
            return d.name
    return None


def pct(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred - meas) / meas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", help="the CPU inference target (default: the first one the device table lacks)")
    args = ap.parse_args()
    paths = Paths(ROOT)
    tp: TrainParams = load_params(paths.params).train
    target = args.target or cpu_target(paths)
    if target is None:
        print("no CPU inference target under data/evaluated/targets/: run `dvc repro` first", file=sys.stderr)
        return 2
    device, mode = TrainParams.split_target(target)
    ops = read_table(paths.target_operations(target), TARGET_OPERATIONS, "evaluate")
    nets = read_table(paths.target_networks(target), TARGET_NETWORKS, "evaluate")
    nops = read_table(paths.target_network_ops(target), TARGET_NETWORK_OPS, "evaluate")
    batch_of_set = {s: int(shape[0]) for s, shape in zip(nets["set_id"], nets["input_shape"])}
    batch_of_op = {o: batch_of_set[s] for s, o in zip(nops["set_id"], nops["op_id"]) if s in batch_of_set}
    ops = ops[ops["op_id"].map(batch_of_op).notna()].reset_index(drop=True)
    ops["batch"] = ops["op_id"].map(batch_of_op).astype(int)
    batches = sorted(set(ops["batch"]))
    if TRAIN_BATCH not in batches or len(batches) < 2:
        print(f"{target} has batches {batches}: needs {TRAIN_BATCH} and at least one other", file=sys.stderr)
        return 2

    train_df = ops[ops["batch"] == TRAIN_BATCH].reset_index(drop=True)
    data = prepare(train_df, mode, device)
    found = find_device(device)  # the target's device, resolved once
    rows = np.arange(data.n)
    ranges, label = op_ranges(data.records), f"{target} (batch {TRAIN_BATCH} only)"
    out: dict = {
        "command": "PYTHONPATH=src python bench/batch_scaling.py",
        "target": target,
        "trained_on_batch": TRAIN_BATCH,
        "ops_trained_on": int(data.n),
        "models": {},
    }
    net_records = netval.network_records(nops)
    for alg in ("xgb", "rf"):
        models = {"time": final_model(data, alg, "improved", "time", tp)}
        # the measured look-up holds the training rows only: every op at another batch is predicted
        coster = netval.coster_from(data, rows, models)
        by_batch: dict = {}
        for b in batches:
            sub_data = prepare(ops[ops["batch"] == b].reset_index(drop=True), mode, device)
            costs = coster.cost(sub_data.records)
            meas = sub_data.y("time")
            err = pct(costs.t_s, meas)
            entry: dict = {
                "seen_in_training": b == TRAIN_BATCH,
                "ops": int(sub_data.n),
                "op_time_mape_pct": float(err.mean()),
                "op_time_mdape_pct": float(np.median(err)),
                "op_time_weighted_error_pct": float(np.abs(costs.t_s - meas).sum() / meas.sum() * 100),
                "cost_sources": {str(s): int(n) for s, n in zip(*np.unique(costs.source, return_counts=True))},
            }
            for _, net in nets[nets["set_id"].map(batch_of_set) == b].iterrows():
                recs, calls = net_records[net["set_id"]]
                c = coster.cost(recs)
                terms = compose.network_terms(c, calls, recs, coster.floor_s, found, mode)
                predicted = compose.Composition(mode).time(terms)  # uncalibrated: one training network
                shape = tuple(int(x) for x in net["input_shape"])
                entry["network"] = {
                    "set_id": net["set_id"],
                    "measured_s": float(net["t_s"]),
                    "predicted_s": float(predicted),
                    "error_pct": float((predicted - net["t_s"]) / net["t_s"] * 100),
                    "warnings": extrapolation_warnings(ranges, label, shape, recs),
                }
            by_batch[str(b)] = entry
        out["models"][f"{alg}-improved"] = by_batch
    write_report(out, Paths(ROOT).bench_report("batch_scaling.json"))
    for name, by_batch in out["models"].items():
        for b, e in by_batch.items():
            n = e.get("network", {})
            print(
                f"{name} batch {b:>4}{' (trained)' if e['seen_in_training'] else '          '}: "
                f"op MAPE {e['op_time_mape_pct']:.1f} % (median {e['op_time_mdape_pct']:.1f} %), "
                f"network {n.get('error_pct', float('nan')):+.1f} %, "
                f"{len(n.get('warnings', []))} extrapolation warning(s)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
