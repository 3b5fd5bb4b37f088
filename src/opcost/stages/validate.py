"""Stage `validate`: networks summed and predicted against measurement, tensor cores, sweep optima,
predictor latency; CSV tables (some also DVC plots), figures, reports/index.md.

Headline figures go to reports/validate/metrics.json (DVC metrics: a few dozen columns); the full
summaries (network counts, every sweep, grid optima) to reports/validate/detail.json. Every input is
declared in dvc.yaml: predictions extract networks afresh instead of reading .opcost/cache, and
predictor latency comes from reports/bench/predictor_latency.json.

`run` calls one step per comparison (`*_step`); each writes its own tables (their names are `Paths`
properties) and figures and adds its rows to the report index, so a comparison can be read, changed or
dropped without reading the others.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from opcost.io import write_report
from opcost.model.prediction.predict import Predictor
from opcost.model.training import netval
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


@dataclass
class Report:
    """What the steps of `run` share: where to write, and the report index and figures they add to.

    `index` rows are (section, link relative to reports/, what it shows), in the order reports/index.md
    lists them; `figures` are logged to MLflow."""

    paths: Paths
    params: Params
    index: list[tuple[str, str, str]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)

    def link(self, path: Path, section: str, what: str, suffix: str = "") -> None:
        """Add `path` (written by a step, or an input shown beside) to the index under `section`."""
        rel = path.relative_to(self.paths.root / "reports").as_posix()
        self.index.append((section, rel + suffix, what))

    def figure_links(self, section: str, drawn: list[tuple[str, str]]) -> None:
        """Figures a report helper drew into validate/figures/, as (file name, what) pairs."""
        for name, what in drawn:
            self.link(self.paths.validate_figures / name, section, what)


@dataclass(frozen=True)
class Inputs:
    """The measured tables every comparison reads (validated against their schemas)."""

    nets: pd.DataFrame
    ops: pd.DataFrame
    occ: pd.DataFrame
    sweeps: pd.DataFrame
    catalog: pd.DataFrame

    @classmethod
    def read(cls, paths: Paths, params: Params) -> "Inputs":
        return cls(
            nets=read_table(paths.evaluated_networks, EVALUATED_NETWORKS, "evaluate"),
            ops=read_table(paths.evaluated_operations, EVALUATED_OPERATIONS, "evaluate"),
            occ=read_table(paths.occurrences, OCCURRENCES, "extract"),
            sweeps=read_table(paths.evaluated_sweeps, SWEEPS, "evaluate"),
            catalog=known_operations(paths, params).reset_index(),
        )


def run(paths: Paths, params: Params, log_to_mlflow: bool = True) -> dict[str, Any]:
    """Every comparison in turn (each step writes its own tables and figures), then the summaries,
    reports/index.md and (optionally) the MLflow run."""
    rep = Report(paths, params)
    inp = Inputs.read(paths, params)
    summed = summed_step(rep, inp)
    oos = out_of_sample_step(rep)
    kind_errors_step(rep)
    # no undeclared input or output; the clock grid of params (validate/clocks.py sweeps it)
    # trust_unrecorded: the stage runs under DVC, which records the md5 of every model folder it reads as a
    # dependency; a folder dvc.lock records with other content is still refused
    predictor = Predictor(
        paths=paths, disk_cache=False, clock_grid_points=params.clock.grid_points, trust_unrecorded=True
    )
    insample = in_sample_step(rep, inp, predictor)
    tensor_cores_step(rep, inp)
    opt, grid = sweeps_step(rep, inp)
    clock_logo, clock_opt = clock_step(rep, inp, predictor)
    xdev = xdevice_step(rep, inp)
    latency_step(rep)
    detail = summaries_step(rep, summed, insample, oos, opt, grid, clock_opt, xdev)
    write_index(paths, rep.index, detail, clocks.index_lines(clock_logo, clock_opt) + xdev["lines"])
    if log_to_mlflow:
        log_mlflow(paths, detail, rep.figures)
    return detail


def summed_step(rep: Report, inp: Inputs) -> pd.DataFrame:
    """Every measured network against the sum of its measured ops (no model involved)."""
    paths, sec = rep.paths, "Summed versus measured"
    summed = summation.summed_vs_measured(inp.nets, inp.ops, inp.occ, inp.catalog)
    write_csv(summed, paths.validate_summed)
    rep.link(
        paths.validate_summed,
        sec,
        "every measured network: measured vs summed time and energy, propagated sigmas, FLOP and call shares covered",
    )
    rep.figure_links(sec, fig_summed(summed, paths.validate_figures, rep.figures))
    scatter = paths.validate_figures / "summed_scatter.png"
    fig_scatter(summed, "measured", "summed", "Sum of measured operations vs measured network", scatter, rep.figures)
    rep.link(scatter, sec, "all networks: sum of measured ops against the measured network (log-log)")
    return summed


def out_of_sample_step(rep: Report) -> pd.DataFrame:
    """The train stages' out-of-sample network predictions gathered into one table and its figures."""
    paths, sec = rep.paths, "Predicted versus measured (out of sample)"
    oos = out_of_sample_table(paths, rep.params)
    write_csv(oos, paths.validate_out_of_sample)
    rep.link(
        paths.validate_out_of_sample,
        sec,
        "every measured network predicted by op models and a composition layer that never saw it "
        "(split=network: leave-one-network-out; split=family: its whole architecture family held out)",
    )
    rep.figure_links(sec, fig_out_of_sample(oos, paths.validate_figures, rep.figures))
    return oos


def kind_errors_step(rep: Report) -> None:
    """The op models' grouped-split errors per op kind, from the train stages' metrics."""
    paths, sec = rep.paths, "Op models by kind"
    kinds = kind_errors(paths, rep.params)
    write_csv(kinds, paths.validate_kind_errors)
    rep.link(paths.validate_kind_errors, sec, "the chosen op models' grouped-split errors per op kind")
    if len(kinds):
        fig = paths.validate_figures / "op_errors_by_kind.png"
        fig_kind_errors(kinds, fig, rep.figures)
        rep.link(fig, sec, "MAPE per op kind and target (grouped split)")


def in_sample_step(rep: Report, inp: Inputs, predictor: Predictor) -> pd.DataFrame:
    """The shipped bundles against the networks they saw: a reference, labelled in-sample."""
    paths = rep.paths
    insample = summation.predicted_vs_measured(inp.nets, predictor)
    write_csv(insample, paths.validate_in_sample)
    rep.link(
        paths.validate_in_sample,
        "Predicted versus measured (in sample)",
        "IN-SAMPLE, for reference only: the shipped bundles (whose op look-up and composition saw these "
        "networks) against the same measurements",
    )
    return insample


def tensor_cores_step(rep: Report, inp: Inputs) -> None:
    """Inference energy per network with and without tensor cores (A30, A30 without TF32, RTX 2080 Ti)."""
    paths, sec = rep.paths, "Tensor cores"
    tc = summation.tensor_cores(inp.nets)
    write_csv(tc, paths.validate_tensor_cores)
    rep.link(
        paths.validate_tensor_cores,
        sec,
        "inference energy per network on A30, A30 without TF32 and RTX 2080 Ti, relative differences",
    )
    if len(tc):
        fig = paths.validate_figures / "tensor_cores.png"
        fig_tensor_cores(tc, fig, rep.figures)
        rep.link(fig, sec, "inference energy per network, three device configs (log scale)")


def sweeps_step(rep: Report, inp: Inputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measured sweeps normalised per knob, their energy- and EDP-optimal settings, and the core x memory
    grids' joint optima; returns (optima, grid optima) for the summaries."""
    paths, sec = rep.paths, "Sweeps"
    norm = sweeps.normalised(inp.sweeps)
    opt = sweeps.optima(norm)
    for knob, g in norm.groupby("knob"):
        cols = ["source", "device", "workload", "value", "time_rel", "energy_rel", "edp_rel"]
        write_csv(g[cols].rename(columns={"value": knob}), paths.validate_sweeps(str(knob)))
    write_csv(opt, paths.validate_sweep_optima)
    rep.link(
        paths.validate_sweep_optima,
        sec,
        "every workload of every sweep: energy- and EDP-optimal setting, energy saved and time lost "
        "vs the highest setting, optimum at the edge?",
    )
    for knob in sorted(norm["knob"].unique()):
        rep.link(paths.validate_sweeps(knob), sec, f"normalised time, energy and EDP per {knob} (DVC plot data)")
    grid = sweeps.grid_optima(inp.sweeps)
    if len(grid):
        write_csv(grid, paths.validate_grid_optima)
        rep.link(
            paths.validate_grid_optima,
            sec,
            "core x memory clock grids (dvfs-conv): the joint energy- and EDP-optimal clock pair "
            "per algorithm, at the edge?",
        )
    rep.figure_links(sec, fig_sweeps(norm, opt, paths.validate_figures, rep.figures))
    return opt, grid


def clock_step(rep: Report, inp: Inputs, predictor: Predictor) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The clock model: train-clock's leave-one-GPU-out tables linked, and the extract sets predicted across
    each device's clock range with their optima; returns (LOGO table, predicted optima)."""
    paths, sec = rep.paths, "Clock model"
    clock_logo = clocks.logo_table(paths)
    if len(clock_logo):
        rep.link(
            paths.clock_table("logo"),
            sec,
            "leave-one-GPU-out and per source: time, power, energy MAPE and the extra energy/EDP at the "
            "predicted optimum, the shipped physical form beside the trees and the stacked blend it is compared with "
            "(stage train-clock)",
        )
        rep.link(paths.clock_table("logo_points"), sec, "every measured clock point with its LOGO prediction")
        rep.link(paths.clock_figures, sec, "per GPU: measured points and LOGO-predicted curves", suffix="/")
    clock_sw = clocks.predicted_sweeps(paths, rep.params, predictor)
    clock_opt = clocks.optima(clock_sw) if len(clock_sw) else pd.DataFrame()
    if len(clock_sw):
        write_csv(clock_sw, paths.validate_clock_sweeps)
        write_csv(clock_opt, paths.validate_clock_optima)
        fig = paths.validate_figures / "clock_sweeps.png"
        clocks.fig_predicted_sweeps(clock_sw, fig, rep.figures)
        rep.link(
            paths.validate_clock_sweeps,
            sec,
            "the extract sets predicted across each device's clock range on A30 and RTX 2080 Ti",
        )
        rep.link(
            paths.validate_clock_optima,
            sec,
            "per set: predicted energy- and EDP-optimal clock, energy saved and slowdown vs the boost clock",
        )
        rep.link(fig, sec, "predicted energy vs clock per set")
    return clock_logo, clock_opt


def latency_step(rep: Report) -> None:
    """Thesis measurement time per network against predictor time; left out without the benchmark file
    (bench/predictor_latency.py writes it, committed)."""
    paths, params, sec = rep.paths, rep.params, "Predictor latency"
    ing = [
        read_table(paths.ingested_dir(n) / "networks.parquet", NET_MEASUREMENTS, f"ingest@{n}")
        for n, s in params.ingest.sources.items()
        if s.kind == "thesis-logs"
    ]
    bench = json.loads(paths.predictor_latency.read_text()) if paths.predictor_latency.is_file() else None
    nets_ing = pd.concat(ing, ignore_index=True) if ing else pd.DataFrame()
    lat = latency_table(bench, nets_ing) if bench is not None else None
    if lat is None:
        return
    write_csv(lat, paths.validate_latency)
    fig = paths.validate_figures / "latency.png"
    fig_latency(lat, fig, rep.figures)
    what = "thesis measurement time per network vs predictor time (bench/predictor_latency.py)"
    rep.link(paths.validate_latency, sec, what)
    rep.link(fig, sec, "the same as a bar chart (log scale)")


def summaries_step(
    rep: Report,
    summed: pd.DataFrame,
    insample: pd.DataFrame,
    oos: pd.DataFrame,
    opt: pd.DataFrame,
    grid: pd.DataFrame,
    clock_opt: pd.DataFrame,
    xdev: dict[str, Any],
) -> dict[str, Any]:
    """The headline figures (validate/metrics.json) and every summary (validate/detail.json); returns the
    detail."""
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
    if xdev["energy_fewshot"]:
        headline["xdevice_energy_fewshot_mape_pct"] = {
            k: {"without": v["energy_mape_without"], "with": v["energy_mape_with"]}
            for k, v in xdev["energy_fewshot"].items()
        }
    write_report(headline, rep.paths.validate_metrics)
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
    detail["xdevice"] = {"networks_by_gpu": xdev["networks"], "energy_logo": xdev["energy"],
                         "energy_fewshot": xdev["energy_fewshot"]}  # fmt: skip
    write_report(detail, rep.paths.validate_detail)
    return detail


def xdevice_step(rep: Report, inp: Inputs) -> dict[str, Any]:
    """The cross-device section: leave-one-GPU-out tables of stages train-xdevice and train-clock, the
    figures per GPU, and thesis network energy predicted entirely transferred (power model refitted
    without the GPU here). Left out (empty) where train-xdevice has not run."""
    from opcost.model.clocks import xpower
    from opcost.model.crossdevice import fewshot

    paths = rep.paths
    empty: dict[str, Any] = {"networks": {}, "energy": {}, "energy_fewshot": {}, "lines": []}
    ops_f, nets_f = paths.xdevice_table("logo_ops"), paths.xdevice_table("logo_networks")
    if not nets_f.is_file():
        return empty
    nets = pd.read_csv(nets_f)
    ops = pd.read_csv(ops_f) if ops_f.is_file() else pd.DataFrame()
    power = pd.read_csv(paths.xpower_logo) if paths.xpower_logo.is_file() else pd.DataFrame()
    net_err = xdevice_report.networks_by_gpu(nets)
    rows, _ = xpower.all_rows(inp.sweeps, paths.evaluated_targets_dir, paths.raw_root)
    energy = xdevice_report.energy_logo(nets, rows)
    write_csv(energy, paths.validate_xdevice_energy)
    summary = xdevice_report.energy_summary(energy) if len(energy) else {}
    few = fewshot.energy_table(energy) if len(energy) else pd.DataFrame()
    write_csv(few, paths.validate_xdevice_energy_fewshot)
    few_summary = fewshot.energy_summary(few) if len(few) else {}
    fig_net, fig_en = paths.validate_figures / "xdevice_networks.png", paths.validate_figures / "xdevice_energy.png"
    xdevice_report.fig_networks(nets, fig_net, rep.figures)
    sec = "Any GPU (leave-one-GPU-out)"
    rep.link(ops_f, sec, "op time per held-out GPU and op kind, NeuSight's OOD anchors beside")
    rep.link(nets_f, sec, "every network predicted by models that never saw its GPU")
    rep.link(fig_net, sec, "network time, predicted (GPU left out) vs measured")
    if len(power):
        rep.link(paths.xpower_logo, sec, "power and energy per held-out GPU and source (model/clocks/xpower.py)")
    if len(energy):
        xdevice_report.fig_energy(energy, fig_en, rep.figures)
        rep.link(paths.validate_xdevice_energy, sec, "thesis network energy entirely transferred, GPU left out")
        rep.link(fig_en, sec, "the same: transferred vs measured energy")
    if len(few):
        rep.link(paths.validate_xdevice_energy_fewshot, sec, "the same with one other network's measured power level")
    return {
        "networks": {
            f"{r['set']}/{r['gpu']}": {k: r[k] for k in ("n", "mape", "mdape", "weighted", "r2")}
            for r in net_err.to_dict("records")
        },
        "energy": summary,
        "energy_fewshot": few_summary,
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
