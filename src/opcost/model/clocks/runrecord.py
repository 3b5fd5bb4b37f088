"""The MLflow records of stage train-clock: the clock model's run and the cross-device power model's (xpower).

Clock run: the fitted form's parameters, its pooled leave-one-GPU-out errors (per cent) and a
predicted-vs-measured time figure; a nested run per compared learner with its per-GPU scores. Power run:
its parameters, pooled and per-card-size errors; a nested run per held-out GPU with its per-row-kind
errors. Names come from model/records/tracking.py, the shape from model/records/runlog.py. Nothing here
reads files or talks to MLflow.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from opcost.model.clocks import xpower
from opcost.model.clocks.clock import ClockModel
from opcost.model.records import tracking
from opcost.model.records.runlog import Figure, Run, RunRecord

HEADLINE = ("time_mape", "energy_mape", "extra_energy_mean", "extra_edp_mean")  # per GPU, of each learner
CLOCK_PARAMS = ("share_a", "share_b", "share_balance", "static_frac", "static_mem", "gamma", "cap_k", "volt_slope",
                "volt_min", "share_scale_bytes", "share_scale_dram", "knee_q")  # fmt: skip
POWER_SCORES = ("power_mape", "energy_mape", "energy_time_weighted")  # per held-out GPU and row kind
CARD_SIZES = ("over_300w", "up_to_300w")


def clock_record(
    model: ClockModel, split: str, logo: pd.DataFrame, chash: str, pred: pd.DataFrame, data_version: str
) -> RunRecord:
    """The clock model's run: `logo` the per-learner, per-GPU scores (clockval.summarise with a `learner`
    column), `pred` the physical form's leave-one-GPU-out points, `chash` the saved model's content hash."""
    children = []
    for learner, g in logo.groupby("learner"):
        metrics = {tracking.score_metric(r.device, q): float(getattr(r, q)) for r in g.itertuples() for q in HEADLINE}
        children.append(
            Run(
                name=tracking.learner_run_name(str(learner)),
                tags={tracking.LEARNER_TAG: str(learner)},
                metrics=metrics,
            )
        )
    off_ref = ~pred["is_ref"]
    figure = Figure(
        file="logo_time.png",
        title="clock model: time at every clock, leave-one-GPU-out [s]",
        unit="s",
        measured=[float(x) for x in pred.loc[off_ref, "t"]],
        predicted=[float(x) for x in pred.loc[off_ref, "t_hat"]],
    )
    params: dict[str, Any] = {k: v for k, v in model.to_json().items() if k in CLOCK_PARAMS}
    return RunRecord(
        name=tracking.CLOCK_RUN,
        tags=tracking.model_tags(tracking.CLOCK_RUN, chash, split, data_version),
        params={**params, "n_curves": model.n_curves, "n_points": model.n_points},
        metrics={tracking.logo_mape_metric(k): 100 * v for k, v in model.logo_error.items()},
        figures=(figure,),
        children=tuple(children),
    )


def xpower_record(
    model: xpower.PowerModel, metrics: dict[str, Any], chash: str, split: str, data_version: str
) -> RunRecord:
    """The power model's run, logged by stage train-clock: `metrics` the stage's reports/xpower/metrics.json
    (`pooled`, `per_gpu`, and per card size each row kind's `pooled` errors and the GPUs)."""
    children = tuple(
        Run(
            name=tracking.logo_run_name(d),
            tags={tracking.HELD_OUT_TAG: d},
            metrics={tracking.score_metric(k, q): v[q] for k, v in kinds.items() for q in POWER_SCORES},
        )
        for d, kinds in metrics["per_gpu"].items()
    )
    by_size = {
        tracking.card_size_metric(size, kind): v["power_mape"]
        for size in CARD_SIZES
        for kind, v in metrics[size].items()
        if kind != "gpus"
    }
    return RunRecord(
        name=tracking.XPOWER_RUN,
        tags=tracking.model_tags(tracking.CLOCK_RUN, chash, split, data_version),
        params={**metrics["params"], "n_rows": model.n_rows},
        metrics={
            tracking.logo_mape_metric("power"): metrics["pooled"]["power_mape"],
            tracking.logo_mape_metric("energy"): metrics["pooled"]["energy_mape"],
            tracking.REL_ERR90_METRIC: model.rel_err90,
        }
        | by_size,
        children=children,
    )
