"""Stage `validate`: networks summed and predicted against measurement, tensor cores, sweep optima,
predictor latency; CSV tables (some also DVC plots), figures, reports/index.md.

Headline figures go to reports/validate/metrics.json (DVC metrics: a few dozen columns); the full
summaries (network counts, every sweep, grid optima) to reports/validate/detail.json. Every input is
declared in dvc.yaml: predictions extract networks afresh instead of reading .opcost/cache, and
predictor latency comes from reports/bench/predictor_latency.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from opcost.config import Params, Paths
from opcost.io import write_json
from opcost.model.predict import Predictor
from opcost.schemas import EVALUATED_NETWORKS, EVALUATED_OPERATIONS, NET_MEASUREMENTS, OCCURRENCES, SWEEPS
from opcost.stages._run import execute
from opcost.tables import known_operations, read_table
from opcost.validate import summation, sweeps
from opcost.validate.report import (
    fig_latency,
    fig_scatter,
    fig_summed,
    fig_sweeps,
    fig_tensor_cores,
    latency_table,
    log_mlflow,
    write_csv,
    write_index,
)

IN_SAMPLE = "predicted_in_sample"


def run(paths: Paths, params: Params, log_to_mlflow: bool = True) -> dict[str, Any]:
    out = paths.validate_dir
    fig_dir = paths.validate_figures
    nets = read_table(paths.evaluated_networks, EVALUATED_NETWORKS, "evaluate")
    ops = read_table(paths.evaluated_operations, EVALUATED_OPERATIONS, "evaluate")
    occ = read_table(paths.occurrences, OCCURRENCES, "extract")
    sw = read_table(paths.evaluated_sweeps, SWEEPS, "evaluate")
    cat = known_operations(paths, params).reset_index()
    figures: list[Path] = []
    index: list[tuple[str, str, str]] = []  # (section, link, what)

    summed = summation.summed_vs_measured(nets, ops, occ, cat)
    write_csv(summed, out / "summed_vs_measured.csv")
    index.append(
        (
            "Summed versus measured",
            "validate/summed_vs_measured.csv",
            "every measured network: measured vs summed time and energy, propagated sigmas, "
            "FLOP and call shares covered",
        )
    )
    for name, what in fig_summed(summed, fig_dir, figures):
        index.append(("Summed versus measured", f"validate/figures/{name}", what))
    fig_scatter(
        summed,
        "measured",
        "summed",
        "Sum of measured operations vs measured network",
        fig_dir / "summed_scatter.png",
        figures,
    )
    index.append(
        (
            "Summed versus measured",
            "validate/figures/summed_scatter.png",
            "all networks: sum of measured ops against the measured network (log-log)",
        )
    )

    predictor = Predictor(paths=paths, disk_cache=False)  # no undeclared input or output
    predicted = summation.predicted_vs_measured(nets, predictor)
    write_csv(predicted, out / "predicted_vs_measured.csv")
    index.append(
        (
            "Predicted versus measured",
            "validate/predicted_vs_measured.csv",
            "every measured network with a trained model: predicted vs measured time and energy, "
            "unseen-kind FLOP share",
        )
    )
    if len(predicted):
        fig_scatter(
            predicted,
            "measured",
            "predicted",
            "Predicted (per-op models) vs measured network",
            fig_dir / "predicted_scatter.png",
            figures,
        )
        index.append(
            (
                "Predicted versus measured",
                "validate/figures/predicted_scatter.png",
                "all networks: prediction from the champion bundles against measurement (log-log)",
            )
        )

    tc = summation.tensor_cores(nets)
    write_csv(tc, out / "tensor_cores.csv")
    index.append(
        (
            "Tensor cores",
            "validate/tensor_cores.csv",
            "inference energy per network on A30, A30 without TF32 and RTX 2080 Ti, relative differences",
        )
    )
    if len(tc):
        fig_tensor_cores(tc, fig_dir / "tensor_cores.png", figures)
        index.append(
            (
                "Tensor cores",
                "validate/figures/tensor_cores.png",
                "inference energy per network, three device configs (log scale)",
            )
        )

    norm = sweeps.normalised(sw)
    opt = sweeps.optima(norm)
    for knob, g in norm.groupby("knob"):
        cols = ["source", "device", "workload", "value", "time_rel", "energy_rel", "edp_rel"]
        write_csv(g[cols].rename(columns={"value": knob}), out / f"sweeps_{knob}.csv")
    write_csv(opt, out / "sweep_optima.csv")
    index.append(
        (
            "Sweeps",
            "validate/sweep_optima.csv",
            "every workload of every sweep: energy- and EDP-optimal setting, energy saved and time lost "
            "vs the highest setting, optimum at the edge?",
        )
    )
    for knob in sorted(norm["knob"].unique()):
        index.append(
            ("Sweeps", f"validate/sweeps_{knob}.csv", f"normalised time, energy and EDP per {knob} (DVC plot data)")
        )
    grid = sweeps.grid_optima(sw)
    if len(grid):
        write_csv(grid, out / "grid_optima.csv")
        index.append(
            (
                "Sweeps",
                "validate/grid_optima.csv",
                "core x memory clock grids (dvfs-conv): the joint energy- and EDP-optimal clock pair "
                "per algorithm, at the edge?",
            )
        )
    for name, what in fig_sweeps(norm, opt, fig_dir, figures):
        index.append(("Sweeps", f"validate/figures/{name}", what))

    ing = [
        read_table(paths.ingested_dir(n) / "networks.parquet", NET_MEASUREMENTS, f"ingest@{n}")
        for n, s in params.ingest.sources.items()
        if s.kind == "thesis-logs"
    ]
    # written by bench/predictor_latency.py (committed); without it the latency section is left out
    bench = json.loads(paths.predictor_latency.read_text()) if paths.predictor_latency.is_file() else None
    nets_ing = pd.concat(ing, ignore_index=True) if ing else pd.DataFrame()
    lat = latency_table(bench, nets_ing) if bench is not None else None
    if lat is not None:
        write_csv(lat, out / "latency.csv")
        fig_latency(lat, fig_dir / "latency.png", figures)
        index.append(
            (
                "Predictor latency",
                "validate/latency.csv",
                "thesis measurement time per network vs predictor time (bench/predictor_latency.py)",
            )
        )
        index.append(("Predictor latency", "validate/figures/latency.png", "the same as a bar chart (log scale)"))

    summed_err = summation.error_summary(summed)
    predicted_err = summation.error_summary(predicted) if len(predicted) else {}
    sweep_summary = sweeps.optima_summary(opt)
    detail = {
        "summed_vs_measured": summed_err,
        IN_SAMPLE: predicted_err,
        "sweeps": sweep_summary,
        "grid_optima": {
            r["workload"]: {
                "energy_optimal": [r["energy_optimal_core_mhz"], r["energy_optimal_mem_mhz"]],
                "edp_optimal": [r["edp_optimal_core_mhz"], r["edp_optimal_mem_mhz"]],
                "energy_saved_pct": 100 * r["energy_saved"],
                "at_edge": r["energy_optimum_at_edge"],
            }
            for _, r in grid.iterrows()
        },
        "summed_min_flops_share": float(summed["flops_share"].min()) if len(summed) else None,
    }
    headline = {
        "summed_vs_measured": {k: _mapes(v) for k, v in summed_err.items()},
        IN_SAMPLE: {k: _mapes(v) for k, v in predicted_err.items()},
        "sweep_median_energy_saved_pct": {k: v["median_energy_saved_pct"] for k, v in sweep_summary.items()},
    }
    write_json(detail, paths.validate_detail)
    write_json(headline, paths.validate_metrics)
    write_index(paths, index, detail)
    if log_to_mlflow:
        log_mlflow(paths, detail, figures)
    return detail


def _mapes(v: dict[str, Any]) -> dict[str, Any]:
    return {"time_mape_pct": v["time_mape_pct"], "energy_mape_pct": v["energy_mape_pct"]}


def summary(m: dict[str, Any]) -> str:
    lines = []
    for comp in ("summed_vs_measured", IN_SAMPLE):
        for k, v in m[comp].items():
            e = "n/a" if v["energy_mape_pct"] is None else f"{v['energy_mape_pct']:.1f} %"
            lines.append(f"{comp} {k}: {v['networks']} networks, time MAPE {v['time_mape_pct']:.1f} %, energy MAPE {e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return execute(
        argv,
        __doc__.splitlines()[0],
        lambda p: p.add_argument("--no-mlflow", action="store_true", help="do not log figures and metrics to MLflow"),
        lambda paths, params, a: run(paths, params, log_to_mlflow=not a.no_mlflow),
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
