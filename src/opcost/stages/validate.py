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

from opcost.io import write_report
from opcost.model import netval
from opcost.model.predict import Predictor
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import EVALUATED_NETWORKS, EVALUATED_OPERATIONS, NET_MEASUREMENTS, OCCURRENCES, SWEEPS
from opcost.stages._run import execute
from opcost.tables import known_operations, read_table, require
from opcost.validate import clocks, summation, sweeps
from opcost.validate import xdevice as xdevice_report
from opcost.validate.report import (
    fig_kind_errors,
    fig_latency,
    fig_out_of_sample,
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

    oos = out_of_sample_table(paths, params)
    write_csv(oos, out / "predicted_vs_measured.csv")
    index.append(
        (
            "Predicted versus measured (out of sample)",
            "validate/predicted_vs_measured.csv",
            "every measured network predicted by op models and a composition layer that never saw it "
            "(split=network: leave-one-network-out; split=family: its whole architecture family held out)",
        )
    )
    for name, what in fig_out_of_sample(oos, fig_dir, figures):
        index.append(("Predicted versus measured (out of sample)", f"validate/figures/{name}", what))
    kinds = kind_errors(paths, params)
    write_csv(kinds, out / "op_errors_by_kind.csv")
    index.append(
        (
            "Op models by kind",
            "validate/op_errors_by_kind.csv",
            "the chosen op models' grouped-split errors per op kind",
        )
    )
    if len(kinds):
        fig_kind_errors(kinds, fig_dir / "op_errors_by_kind.png", figures)
        index.append(
            (
                "Op models by kind",
                "validate/figures/op_errors_by_kind.png",
                "MAPE per op kind and target (grouped split)",
            )
        )
    predictor = Predictor(paths=paths, disk_cache=False)  # no undeclared input or output
    insample = summation.predicted_vs_measured(nets, predictor)
    write_csv(insample, out / "predicted_in_sample.csv")
    index.append(
        (
            "Predicted versus measured (in sample)",
            "validate/predicted_in_sample.csv",
            "IN-SAMPLE, for reference only: the shipped bundles (whose op look-up and composition saw these "
            "networks) against the same measurements",
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

    clock_logo = clocks.logo_table(paths)
    if len(clock_logo):
        index.append(
            (
                "Clock model",
                "clock/logo.csv",
                "leave-one-GPU-out and per source: time, power, energy MAPE and the extra energy/EDP at the "
                "predicted optimum, the shipped physical form and the comparison trees (stage train-clock)",
            )
        )
        index.append(("Clock model", "clock/logo_points.csv", "every measured clock point with its LOGO prediction"))
        index.append(("Clock model", "clock/figures/", "per GPU: measured points and LOGO-predicted curves"))
    clock_sw = clocks.predicted_sweeps(paths, params, predictor)
    clock_opt = clocks.optima(clock_sw) if len(clock_sw) else pd.DataFrame()
    if len(clock_sw):
        write_csv(clock_sw, out / "clock_sweeps.csv")
        write_csv(clock_opt, out / "clock_optima.csv")
        clocks.fig_predicted_sweeps(clock_sw, fig_dir / "clock_sweeps.png", figures)
        index.append(
            (
                "Clock model",
                "validate/clock_sweeps.csv",
                "the extract sets predicted across each device's clock range on A30 and RTX 2080 Ti",
            )
        )
        index.append(
            (
                "Clock model",
                "validate/clock_optima.csv",
                "per set: predicted energy- and EDP-optimal clock, energy saved and slowdown vs the boost clock",
            )
        )
        index.append(("Clock model", "validate/figures/clock_sweeps.png", "predicted energy vs clock per set"))

    xdev = xdevice_section(paths, sw, index, figures)

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

    summed_err = summation.error_summary(summed, "summed")
    predicted_err = summation.error_summary(insample) if len(insample) else {}
    oos_err = (
        {f"{t}/{split}": netval.error_summary(g) for (t, split), g in oos.groupby(["target", "split"])}
        if len(oos)
        else {}
    )
    sweep_summary = sweeps.optima_summary(opt)
    detail = {
        "summed_vs_measured": summed_err,
        IN_SAMPLE: predicted_err,
        "out_of_sample": oos_err,
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
        "out_of_sample_mape_pct": {
            k: {q: v[q]["mape_pct"] for q in ("time", "energy") if q in v} for k, v in oos_err.items()
        },
        "sweep_median_energy_saved_pct": {k: v["median_energy_saved_pct"] for k, v in sweep_summary.items()},
    }
    if xdev["energy"]:
        headline["xdevice_energy_logo_mape_pct"] = {k: v["mape"] for k, v in xdev["energy"].items()}
    write_report(headline, paths.validate_metrics)
    detail["clock_optima"] = (
        {
            f"{d}-{m}": {
                "sets": int(len(g)),
                "median_energy_optimal_mhz": float(g["energy_optimal_mhz"].median()),
                "median_energy_saved_pct": float(g["energy_saved_pct"].median()),
                "median_edp_optimal_mhz": float(g["edp_optimal_mhz"].median()),
            }
            for (d, m), g in clock_opt.groupby(["device_config", "mode"])
        }
        if len(clock_opt)
        else {}
    )
    detail["xdevice"] = {"networks_by_gpu": xdev["networks"], "energy_logo": xdev["energy"]}
    write_report(detail, paths.validate_detail)
    write_index(paths, index, detail, clocks.index_lines(clock_logo, clock_opt) + xdev["lines"])
    if log_to_mlflow:
        log_mlflow(paths, detail, figures)
    return detail


def xdevice_section(
    paths: Paths, sw: pd.DataFrame, index: list[tuple[str, str, str]], figures: list[Path]
) -> dict[str, Any]:
    """The cross-device section: leave-one-GPU-out tables of stages train-xdevice and train-clock, the
    figures per GPU, and thesis network energy predicted entirely transferred (power model refitted
    without the GPU here). Left out (empty) where train-xdevice has not run."""
    from opcost.model import xpower

    empty: dict[str, Any] = {"networks": {}, "energy": {}, "lines": []}
    ops_f, nets_f = paths.xdevice_table("logo_ops"), paths.xdevice_table("logo_networks")
    if not nets_f.is_file():
        return empty
    nets = pd.read_csv(nets_f)
    ops = pd.read_csv(ops_f) if ops_f.is_file() else pd.DataFrame()
    power = (
        pd.read_csv((paths.xpower_report_dir / "logo.csv"))
        if (paths.xpower_report_dir / "logo.csv").is_file()
        else pd.DataFrame()
    )
    net_err = xdevice_report.networks_by_gpu(nets)
    rows, _ = xpower.all_rows(sw, paths.evaluated_targets_dir)
    energy = xdevice_report.energy_logo(nets, rows)
    write_csv(energy, paths.validate_dir / "xdevice_energy.csv")
    summary = xdevice_report.energy_summary(energy) if len(energy) else {}
    fig_net, fig_en = paths.validate_figures / "xdevice_networks.png", paths.validate_figures / "xdevice_energy.png"
    xdevice_report.fig_networks(nets, fig_net, figures)
    sec = "Any GPU (leave-one-GPU-out)"
    index.append((sec, "xdevice/logo_ops.csv", "op time per held-out GPU and op kind, NeuSight's OOD anchors beside"))
    index.append((sec, "xdevice/logo_networks.csv", "every network predicted by models that never saw its GPU"))
    index.append((sec, f"validate/figures/{fig_net.name}", "network time, predicted (GPU left out) vs measured"))
    if len(power):
        index.append((sec, "xpower/logo.csv", "power and energy per held-out GPU and source (model/xpower.py)"))
    if len(energy):
        xdevice_report.fig_energy(energy, fig_en, figures)
        index.append((sec, "validate/xdevice_energy.csv", "thesis network energy entirely transferred, GPU left out"))
        index.append((sec, f"validate/figures/{fig_en.name}", "the same: transferred vs measured energy"))
    return {
        "networks": {
            f"{r['set']}/{r['gpu']}": {k: r[k] for k in ("n", "mape", "mdape", "weighted", "r2")}
            for r in net_err.to_dict("records")
        },
        "energy": summary,
        "lines": xdevice_report.index_lines(ops, net_err, power, summary),
    }


def out_of_sample_table(paths: Paths, params: Params) -> pd.DataFrame:
    """The train stages' leave-one-network-out and -family-out network predictions, all targets."""
    frames = []
    for t in params.train.targets:
        f = require(paths.train_networks(t), f"train@{t}")
        df = pd.read_csv(f)
        if len(df):
            frames.append(df.assign(target=t))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["target", "split"])


def kind_errors(paths: Paths, params: Params) -> pd.DataFrame:
    rows = []
    for t in params.train.targets:
        detail = json.loads(require(paths.train_metrics(t), f"train@{t}").read_text())[t]
        for q, kinds in detail.get("by_kind", {}).items():
            for kind, v in kinds.items():
                rows.append({"target": t, "quantity": q, "kind": kind, **v})
    return pd.DataFrame(rows)


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
