"""Stage `train-clock`: fit the transferred clock model on the cross-clock sweeps, validate it, register it.

Reads data/evaluated/sweeps.parquet (the core-clock curves of known devices; model/clocks/clock.py says
what is skipped and why). Then:
1. leave-one-GPU-out and leave-one-kernel-out validation of the physical form, and leave-one-GPU-out
   of the comparison learners (model/clocks/clockval.py): trees, and the physical form stacked with the
   zero-parameter guesses (weights from an inner leave-one-GPU-out on the training GPUs only);
2. the physical form fitted on every GPU, with the pooled leave-one-GPU-out errors stored in it
   (predictions widen their intervals by them).
3. the zero-parameter guesses' leave-one-GPU-out scores beside the model's (reports/clock/guesses.csv,
   vs_guesses.csv, metrics.json "vs_guesses"): the bar the model must clear; per curve, the share that fits
   it best in hindsight beside the model's and the features a prediction has (shares.csv, "share_gap_logo");
   the share path network predictions take (roofline split from FLOPs and bytes), leave-one-GPU-out on the sweeps
   whose FLOPs and bytes are known: Perseus stages and the GPU-FREQUENCY-DVFS kernels of data/clock_kernels.csv
   (path.csv, "path_validation");
4. the cross-device power model (model/clocks/xpower.py) on every device with power data (the sweeps and the
   thesis targets), leave-one-GPU-out, then fitted on all: models/xpower/, reports/xpower/.
Writes models/clock/ (clock_model.json, run.json), the headline reports/clock/metrics.json and the
detail beside it (logo.csv, loko.csv, curves.csv, detail.json, figures/); replays the runs into
MLflow and registers `opcost-clock` and `opcost-xpower` (champion rules of model/store/registry.py).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pandas as pd

from opcost.io import atomic_path, write_report
from opcost.model.clocks import clockval, xpower
from opcost.model.clocks.clock import BALANCE_REF, ClockModel, fit, sweep_curves
from opcost.model.clocks.runrecord import HEADLINE, clock_record, xpower_record
from opcost.model.records import runlog, tracking
from opcost.model.store import registry
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import SWEEPS
from opcost.stages._run import execute_logged
from opcost.tables import read_table


def split_id(pts: pd.DataFrame, min_points: int) -> str:
    return f"logo-{'+'.join(sorted(set(pts['device'])))}-min{min_points}"


def _csv(df: pd.DataFrame, target: Any) -> None:
    with atomic_path(target) as tmp:
        df.to_csv(tmp, index=False, float_format="%.6g")


def figures(pred: pd.DataFrame, folder: Any) -> list[str]:
    """Per GPU: measured points and leave-one-GPU-out predicted energy curves (relative to each curve's
    reference energy) for up to six curves, and time likewise."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for dev, g in pred.groupby("device"):
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
        for i, (_curve, c) in enumerate(g.groupby("curve")):
            if i >= 6:
                break
            color = f"C{i}"
            e0, t0 = c["e"][c["is_ref"]].iloc[0], c["t_ref"].iloc[0]
            label = c["workload"].iloc[0][:28]
            axes[0].plot(c["f"], c["e"] / e0, "o", color=color, ms=3)
            axes[0].plot(c["f"], c["e_hat"] / e0, "-", color=color, lw=1, label=label)
            axes[1].plot(c["f"], c["t"] / t0, "o", color=color, ms=3)
            axes[1].plot(c["f"], c["t_hat"] / t0, "-", color=color, lw=1)
        axes[0].set_ylabel("energy / energy at reference clock")
        axes[1].set_ylabel("time / time at reference clock")
        for ax in axes:
            ax.set_xlabel("core clock [MHz]")
        axes[0].legend(fontsize=6)
        fig.suptitle(f"{dev}: measured (points) vs predicted leave-one-GPU-out (lines)", fontsize=9)
        fig.tight_layout()
        name = f"logo_{dev}.png"
        with atomic_path(folder / name) as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
        written.append(name)
    return written


def run(paths: Paths, params: Params, log_to_mlflow: bool = True) -> dict[str, Any]:
    cp = params.clock
    sweeps = read_table(paths.evaluated_sweeps, SWEEPS, "evaluate")
    pts, skipped = sweep_curves(sweeps, cp.min_points)

    pred, _ = clockval.leave_one_gpu_out(pts)
    curves = clockval.curve_scores(pred)
    tree_pred, _ = clockval.leave_one_gpu_out(pts, lambda d: clockval.trees(d, cp.seed, cp.tree_iterations))
    stacked_pred, _ = clockval.leave_one_gpu_out(pts, clockval.stacked)  # compared, not shipped (docs/clocks.md)
    logo = pd.concat(
        [
            clockval.summarise(curves, ["device", "source"]).assign(learner="physical"),
            clockval.summarise(clockval.curve_scores(tree_pred), ["device", "source"]).assign(learner="trees"),
            clockval.summarise(clockval.curve_scores(stacked_pred), ["device", "source"]).assign(learner="stacked"),
        ],
        ignore_index=True,
    )
    loko = clockval.summarise(clockval.curve_scores(clockval.leave_one_kernel_out(pts)), ["device", "source"])

    model = fit(pts)
    model.logo_error = clockval.pooled_error(curves)
    model.logo_error_bins = clockval.error_by_ratio(pred)
    split = split_id(pts, cp.min_points)
    chash = registry.canonical_hash(model.to_json())
    data_version = registry.stage_data_version(paths.root, tracking.CLOCK_RUN)  # what sync-registry tags it with
    record = clock_record(model, split, logo, chash, pred, data_version).as_dict()
    model.save(paths.clock_model_dir)
    runlog.save(record, paths.clock_model_dir)

    phys = logo[logo["learner"] == "physical"]
    metrics: dict[str, Any] = {
        "logo": {r.device: {q: float(getattr(r, q)) for q in HEADLINE} for r in phys.itertuples()},
        "logo_pooled_pct": {k: 100 * v for k, v in model.logo_error.items()},
        "loko_pooled_time_mape": float(np.average(loko["time_mape"], weights=loko["points"])),
        "loko_pooled_energy_mape": float(np.average(loko["energy_mape"], weights=loko["points"])),
        "params": {
            "share_a": model.share_a,
            "share_b": model.share_b,
            "share_balance": model.share_balance,
            "static_frac": model.static_frac,
            "static_mem": model.static_mem,
            "cap_k": model.cap_k,
            "volt_slope": model.volt_slope,
            "volt_min": model.volt_min,
            "share_scale_bytes": model.share_scale_bytes,
            "share_scale_dram": model.share_scale_dram,
            "knee_q": model.knee_q,
        },
        "gamma": model.gamma,
    }
    guesses = clockval.guess_scores(pts)
    versus = clockval.beats_guesses(phys, guesses)
    metrics["vs_guesses"] = {
        r.device: {
            q: {"model": float(getattr(r, q)), "best_guess": float(getattr(r, f"best_guess_{q}")),
                "best_guess_is": str(getattr(r, f"best_guess_{q}_by")), "beats": bool(getattr(r, f"beats_{q}"))}
            for q in ("time_mape", "energy_mape")
        }
        for r in versus.itertuples()
    }  # fmt: skip
    metrics["gpus_where_model_beats_every_guess"] = int((versus["beats_time_mape"] & versus["beats_energy_mape"]).sum())
    # what any device-level share could at best reach, chosen in hindsight on each GPU's own points: a bound
    # that says which goal misses need per-kernel information rather than better device-level terms
    metrics["share_bounds"] = {
        r.device: {"best_device_share": r.best_device_share, "time_mape": r.best_device_share_time_mape,
                   "per_curve_time_mape": r.best_curve_share_time_mape}
        for r in clockval.share_bounds(pts).itertuples()
    }  # fmt: skip
    # per curve: the share that fits it best in hindsight beside the share the model (fitted on the other GPUs)
    # gives it and every feature a prediction has (which feature could predict the share on an unseen GPU)
    shares = clockval.share_table(pts)
    gap = (shares["model_share"] - shares["best_share"]).abs().groupby(shares["device"]).mean()
    metrics["share_gap_logo"] = {str(d): float(v) for d, v in gap.items()}
    path = clockval.path_validation(pts)
    metrics["path_validation"] = {
        f"{r.device} {r.share_path}": {"time_mape": float(r.time_mape), "energy_mape": float(r.energy_mape)}
        for r in path.itertuples()
    }
    write_report(metrics, paths.clock_metrics)
    _csv(path, paths.clock_table("path"))
    _csv(shares, paths.clock_table("shares"))
    _csv(guesses, paths.clock_table("guesses"))
    _csv(versus, paths.clock_table("vs_guesses"))
    _csv(logo, paths.clock_table("logo"))
    _csv(loko, paths.clock_table("loko"))
    _csv(curves.drop(columns=["time_ape", "power_ape", "energy_ape"]), paths.clock_table("curves"))
    cols = ["source", "device", "workload", "f", "f_ref", "is_ref", "t", "t_hat", "p", "p_hat", "e", "e_hat"]
    _csv(pred[cols], paths.clock_table("logo_points"))
    write_report(
        {"skipped_rows": skipped, "model": model.to_json(), "figures": figures(pred, paths.clock_figures)},
        paths.clock_detail,
    )
    power = run_xpower(paths, sweeps, data_version)
    registered = None
    if log_to_mlflow:
        mlflow = tracking.setup(paths.root)
        with runlog.replayed(mlflow, record, tracking.source_tags(paths.root)):
            score = -100 * (model.logo_error["time"] + model.logo_error["energy"])
            mlflow.log_metric(tracking.CLOCK_SCORE_METRIC, score)
            registered = registry.register_folder(
                paths.root, mlflow, tracking.CLOCK_MODEL, paths.clock_model_dir, chash, score, split, {}, data_version
            )
        with runlog.replayed(mlflow, power["record"], tracking.source_tags(paths.root)):
            pscore = -power["metrics"]["pooled"]["power_mape"] - power["metrics"]["pooled"]["energy_mape"]
            mlflow.log_metric(tracking.XPOWER_SCORE_METRIC, pscore)
            power["registered_version"] = registry.register_folder(
                paths.root, mlflow, tracking.XPOWER_MODEL, paths.xpower_model_dir, power["hash"], pscore,
                power["split"], {}, data_version,
            )  # fmt: skip
    return {"model": model, "logo": logo, "loko": loko, "registered_version": registered, "versus": versus,
            "power": power}  # fmt: skip


BIG_CARD_W = 300.0  # the power model's errors are reported apart for cards whose TDP is above this


def pooled(g: pd.DataFrame) -> dict[str, float]:
    """Leave-one-GPU-out power errors of rows `g` (p measured, p_hat predicted, t time): MAPE, median, and the
    energy's time-weighted error (energy with the measured time: its MAPE is the power's)."""
    a = (g["p_hat"] / g["p"] - 1).abs()
    e, e_hat = g["p"] * g["t"], g["p_hat"] * g["t"]
    return {"rows": int(len(g)), "power_mape": float(100 * a.mean()), "energy_mape": float(100 * a.mean()),
            "power_mdape": float(100 * a.median()),
            "energy_time_weighted": float(100 * (e_hat - e).abs().sum() / e.sum())}  # fmt: skip


def by_card_size(off: pd.DataFrame) -> dict[str, Any]:
    """`pooled` per row kind for cards above BIG_CARD_W TDP (`over_300w`) and the rest (`up_to_300w`), with
    the GPUs each holds. Why apart: the big cards draw 500-630 W in training where the form,
    learnt mostly on smaller ones, says 330-370 W; a pooled figure would hide it."""
    out: dict[str, Any] = {}
    for name, sel in (("over_300w", off["tdp"] > BIG_CARD_W), ("up_to_300w", off["tdp"] <= BIG_CARD_W)):
        d = off[sel.to_numpy()]
        out[name] = {str(k): pooled(g) for k, g in d.groupby("kind")} | {"gpus": sorted(set(d["device"]))}
    return out


def run_xpower(paths: Paths, sweeps: pd.DataFrame, data_version: str = "") -> dict[str, Any]:
    """Fit, validate (leave-one-GPU-out) and save the cross-device power model; its reports and run record
    (tagged with the stage's `data_version`)."""
    rows, skipped = xpower.all_rows(sweeps, paths.evaluated_targets_dir, paths.raw_root)
    pred, seen = xpower.leave_one_gpu_out(rows)
    table = xpower.scores(pred)
    model = xpower.fit(rows)
    model.rel_err90 = xpower.rel_err90(pred)
    model.levels = xpower.device_levels(model, rows)
    off = pred[~pred["is_ref"].astype(bool)]
    ape = (off["p_hat"] / off["p"] - 1).abs()
    model.logo_error = {"power": float(ape.mean()), "energy": float(ape.mean())}
    split = f"logo-{'+'.join(sorted(seen))}"
    chash = registry.canonical_hash(model.to_json())

    per_gpu = {str(d): {str(k): pooled(gk) for k, gk in g.groupby("kind")} for d, g in off.groupby("device")}
    metrics: dict[str, Any] = {
        "pooled": pooled(off),
        "pooled_absolute": pooled(off[off["kind"] == "absolute"]),
        "pooled_sweep": pooled(off[off["kind"] == "sweep"]),
        **by_card_size(off),
        "per_gpu": per_gpu,
        "rel_err90": model.rel_err90,
        "gpus_energy_mape_le_15": int(sum(all(v["energy_mape"] <= 15 for v in k.values()) for k in per_gpu.values())),
        "params": {k: getattr(model, k) for k in xpower.PARAMS},
        "levels": model.levels,
        "skipped_rows": skipped,
    }
    paths.xpower_report_dir.mkdir(parents=True, exist_ok=True)
    model.save(paths.xpower_model_dir)
    record = xpower_record(model, metrics, chash, split, data_version).as_dict()
    runlog.save(record, paths.xpower_model_dir)
    write_report(metrics, paths.xpower_report_dir / "metrics.json")
    _csv(table, paths.xpower_report_dir / "logo.csv")
    return {"model": model, "metrics": metrics, "table": table, "record": record, "hash": chash, "split": split,
            "registered_version": None}  # fmt: skip


def summary(r: dict[str, Any]) -> str:
    m: ClockModel = r["model"]
    lines = [
        f"clock model: share = sigmoid({m.share_a:.3g} + {m.share_b:.3g} P_ref/TDP + {m.share_balance:.3g} "
        f"log(balance/{BALANCE_REF:g})) at the memory clock, static {m.static_frac:.3g} + {m.static_mem:.3g} (1 - s) "
        f"x min(TDP, P_ref), P_dyn ~ f V^{m.gamma - 1:.3g} with V = max({m.volt_min:.3g}, 1 - {m.volt_slope:.3g} "
        f"(1 - f/f_boost)); observed shares x {m.share_scale_bytes:.3g} (bytes-based), x {m.share_scale_dram:.3g} "
        f"(DRAM-activity-based); memory-path knee {m.knee_q:.3g} B per SM cycle (pre-Ampere); {m.n_curves} curves on "
        f"{', '.join(m.trained_on)}"
    ]
    for row in r["logo"].itertuples():
        lines.append(
            f"leave-one-GPU-out {row.learner:8s} {row.device:9s} {row.source}: time MAPE {row.time_mape:.1f} %, "
            f"energy MAPE {row.energy_mape:.1f} %, extra energy at predicted optimum {row.extra_energy_mean:.1f} % "
            f"(max {row.extra_energy_max:.1f} %), extra EDP {row.extra_edp_mean:.1f} %"
        )
    for v in r["versus"].itertuples():
        lines.append(
            f"vs guesses {v.device:9s}: time {v.time_mape:.1f} % (best guess {v.best_guess_time_mape:.1f} %, "
            f"{v.best_guess_time_mape_by}), energy {v.energy_mape:.1f} % (best guess {v.best_guess_energy_mape:.1f} %, "
            f"{v.best_guess_energy_mape_by})"
        )
    pm = r["power"]
    for t in pm["table"].itertuples():
        lines.append(
            f"power model LOGO {t.device:9s} {t.kind:8s} {t.source:22s}: power/energy MAPE {t.power_mape:.1f} %, "
            f"median {t.power_mdape:.1f} %, energy time-weighted {t.energy_time_weighted:.1f} %, R2 {t.energy_r2:.3f}"
        )
    reg = r["registered_version"]
    lines.append(f"registered {tracking.CLOCK_MODEL} version {reg}" if reg else "registry: nothing new to register")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return execute_logged(argv, __doc__.splitlines()[0], run, summary)


if __name__ == "__main__":
    sys.exit(main())
