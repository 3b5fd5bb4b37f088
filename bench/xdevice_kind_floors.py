"""Cross-device op model with each source config's own kind floors in its training offset: an experiment,
not shipped (see the stop-34 note and reports/bench/xdevice_kind_floors.json).

Why: leave-one-GPU-out, the A30 is predicted 2-3x too slow on small ops (reports/xdevice/logo_ops.csv:
conv 72 %, batchnorm 75 %, pool 101 % MAPE) and its small networks up to +145 %. The thesis' RTX 2080 Ti
rows carry per-kind floors of 73-149 us (data/floors.py), the A30's 20-30 us: a property of the
measuring host, which xdevice.design's one `floor_s` leaves to the trees, so they learn it as GPU
physics. Variant `kind floors`: each training row's offset is log(roofline + its own config's kind
floor) (floors.kind_floors over that config's memory-bound rows of the same cross-device kind); a GPU
being predicted keeps `floor_s`. Each also with one composition (host floor, scale) per measuring setup
(thesis, NeuSight), fitted on that setup's training-GPU networks. Every variant runs through the
train-xdevice stage's own pieces (op rows, network rows, leave-one-GPU-out, network composition refit per
fold). One more takes kind floors off the thesis rows only (NeuSight's event-timed op rows carry the
host's dispatch too: their per-call cost is part of what NeuSight's networks pay). Two more variants
widen the composition's host-floor grid from 1-40 us to 1-400 us.

    PYTHONPATH=src python bench/xdevice_kind_floors.py

Needs `dvc pull`. About a minute on two cores. Writes reports/bench/xdevice_kind_floors.json.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import benchreport  # noqa: E402
from opcost.data.floors import kind_floors  # noqa: E402
from opcost.model.crossdevice import xdevice, xdevice_net  # noqa: E402
from opcost.params.load import load_params  # noqa: E402
from opcost.params.xdevice import XdeviceParams  # noqa: E402
from opcost.paths import Paths  # noqa: E402
from opcost.stages import train_xdevice as stage  # noqa: E402

COL = {c: i for i, c in enumerate(xdevice.COLUMNS)}
WIDE_GRID = tuple(float(x) for x in np.geomspace(1e-6, 4e-4, 60))


def fit_with_kind_floors(rows: pd.DataFrame, p: XdeviceParams, sources: tuple[str, ...] = ()) -> xdevice.OpModel:
    """xdevice.fit with each training row's offset at its own config's kind floor (only rows of `sources`
    where given: "thesis", "neusight")."""
    X, off = xdevice.design(rows, p.floor_s)
    roof = np.exp(off) - p.floor_s
    mem, comp = np.exp(X[:, COL["log_memory_s"]]), np.exp(X[:, COL["log_compute_s"]])
    t, kinds, cfg = rows["t_s"].to_numpy(float), rows["xkind"].to_numpy(), rows["device_config"].to_numpy()
    fl = np.full(len(rows), p.floor_s)
    use = rows["source"].isin(sources).to_numpy() if sources else np.ones(len(rows), bool)
    for c in np.unique(cfg[use]):
        sel = (cfg == c) & use
        table = dict(kind_floors(kinds[sel], t[sel], mem[sel], comp[sel], p.floor_s, "inference"))
        fl[sel] = [table.get(k, p.floor_s) for k in kinds[sel]]
    ens = xdevice.fit_trees(X, np.log(t) - np.log(roof + fl), p, xdevice.weights(rows))
    return xdevice.OpModel(ens, p.floor_s, tuple(sorted({xdevice.gpu_of(c) for c in np.unique(cfg)})))


def run(
    fit_fn: xdevice.FitFn, rows: pd.DataFrame, nets: pd.DataFrame, nodes: pd.DataFrame, p: XdeviceParams,
    per_set: bool = False,
) -> dict:  # fmt: skip
    """Leave-one-GPU-out ops and networks; with `per_set` each measuring setup's networks (thesis, NeuSight)
    get a composition (host floor, scale) fitted on that setup's training-GPU networks only."""
    folds: dict[str, xdevice.OpModel] = {}
    pred = xdevice.leave_one_gpu_out(rows, p, fit_fn=fit_fn, on_fold=lambda g, m: folds.__setitem__(g, m))
    ops = xdevice.logo_table(pred)
    if per_set:
        parts = []
        for _, sub in nets.groupby("set"):
            parts.append(xdevice_net.logo_networks(sub, nodes[nodes["config"].isin(sub["config"])], folds))
        held = pd.concat(parts, ignore_index=True)
    else:
        held = xdevice_net.logo_networks(nets, nodes, folds)
    out: dict[str, Any] = {
        "ops_mape_pct": {f"{r.gpu}/{r.group}": round(float(r.mape), 1) for r in ops.itertuples()},
        "networks": {k: stage.net_scores(g) for k, g in (("all", held), *held.groupby("set"))},
    }
    out["networks_by_gpu"] = {
        str(g): {**stage.net_scores(d), "host_floor_s": float(d["host_floor_s"].iloc[0])}
        for g, d in held.groupby("gpu")
    }
    return out


def main() -> int:
    paths = Paths(ROOT)
    params = load_params(paths.params)
    rows = stage.op_rows(paths, params)
    nets, nodes = stage.net_rows(paths, params)
    report = {
        "shipped (one floor_s)": run(xdevice.fit, rows, nets, nodes, params.xdevice),
        "kind floors": run(fit_with_kind_floors, rows, nets, nodes, params.xdevice),
        "kind floors, host floor per measuring setup": run(
            fit_with_kind_floors, rows, nets, nodes, params.xdevice, per_set=True
        ),
        "shipped, host floor per measuring setup": run(xdevice.fit, rows, nets, nodes, params.xdevice, per_set=True),
    }
    thesis_only = partial(fit_with_kind_floors, sources=("thesis",))
    report["kind floors of the thesis rows only"] = run(thesis_only, rows, nets, nodes, params.xdevice)
    shipped_grid = xdevice_net.HOST_FLOOR_GRID
    try:  # the host floor's grid to 400 us: where the kind-floor variants' host floor goes when not held at 40 us
        xdevice_net.HOST_FLOOR_GRID = WIDE_GRID
        report["kind floors, host floor grid to 400 us"] = run(fit_with_kind_floors, rows, nets, nodes, params.xdevice)
        report["kind floors, per measuring setup, grid to 400 us"] = run(
            fit_with_kind_floors, rows, nets, nodes, params.xdevice, per_set=True
        )
    finally:
        xdevice_net.HOST_FLOOR_GRID = shipped_grid
    for name, r in report.items():
        gpus = ", ".join(f"{g} {v['mape']:.1f} (host floor {1e6 * v['host_floor_s']:.1f} us)"
                         for g, v in r["networks_by_gpu"].items())  # fmt: skip
        print(f"{name}: networks MAPE all {r['networks']['all']['mape']:.1f} %; {gpus}")
    return benchreport.save(report, "xdevice_kind_floors.json")


if __name__ == "__main__":
    sys.exit(main())
