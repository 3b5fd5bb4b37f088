"""The MLflow record of stage train-xdevice: the cross-device op-time model's run.

Parent: what the model was trained on and its composition, the pooled leave-one-GPU-out op and network
MAPEs, the few-shot ratios and errors, the interval's coverage and width (per held-out GPU and over all).
A nested run per held-out GPU: its op groups' errors, its networks' errors and a predicted-vs-measured
figure of those networks. Names come from model/records/tracking.py, the shape from model/records/runlog.py.
Nothing here reads files or talks to MLflow.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from opcost.model.crossdevice import fewshot
from opcost.model.crossdevice.xdevice import XdeviceModel
from opcost.model.crossdevice.xdevice_net import net_scores
from opcost.model.records import tracking
from opcost.model.records.runlog import Figure, Run, RunRecord

OP_SCORES = ("mape", "mdape", "twe")  # per held-out GPU and op group
INTERVAL_SCORES = ("coverage_90", "median_width_pct")  # per held-out GPU
INTERVAL_OVERALL = ("coverage_90", "median_width_pct", "median_halfwidth_pct", "coverage_90_in_sample")


def held_out_runs(ops: pd.DataFrame, nets: pd.DataFrame) -> tuple[Run, ...]:
    """A nested run per held-out GPU of `ops` (xdevice.logo_table; its pooled `all` rows left out), with its
    networks' scores and figure where `nets` (xdevice_net.logo_networks) has any."""
    children = []
    for g, d in ops[ops["gpu"] != "all"].groupby("gpu"):
        m = {tracking.score_metric(r.group, k): float(getattr(r, k)) for r in d.itertuples() for k in OP_SCORES}
        nd = nets[nets["gpu"] == g]
        if len(nd):
            m |= {tracking.score_metric("network", k): v for k, v in net_scores(nd).items() if k != "n"}
        figure = Figure(
            file=f"logo_networks_{g}.png",
            title=f"{g}: networks predicted by models that never saw {g} [s]",
            unit="s",
            measured=[float(x) for x in nd["measured_s"]],
            predicted=[float(x) for x in nd["predicted_s"]],
        )
        children.append(
            Run(
                name=tracking.logo_run_name(str(g)),
                tags={tracking.HELD_OUT_TAG: str(g)},
                metrics=m,
                figures=(figure,) if len(nd) else (),
            )
        )
    return tuple(children)


def parent_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The parent run's metrics from the stage's reports/xdevice/metrics.json (`ops`, `networks`, `fewshot`,
    `interval`)."""
    flat = {tracking.xdevice_op_metric(g): v["mape"] for g, v in metrics["ops"].items()}
    flat |= {tracking.xdevice_net_metric(s): v["mape"] for s, v in metrics["networks"].items()}
    fs = metrics["fewshot"]
    flat |= {tracking.fewshot_ratio_metric(v): fs[v]["ratio"] for v in fewshot.VARIANTS if v in fs}
    per_gpu = fs["per_gpu"]
    flat |= {tracking.fewshot_mape_metric(g, v): p[v]["mape"] for g, p in per_gpu.items() for v in fewshot.VARIANTS}
    flat |= {tracking.fewshot_mape_metric(g, "without"): p["mape_without"] for g, p in per_gpu.items()}
    iv = metrics["interval"]
    for k in INTERVAL_SCORES:
        flat |= {tracking.xdevice_interval_metric(k, g): v[k] for g, v in iv["per_gpu"].items()}
    flat |= {tracking.xdevice_interval_metric(k): iv[k] for k in INTERVAL_OVERALL}
    return flat


def build(
    model: XdeviceModel, metrics: dict[str, Any], ops: pd.DataFrame, nets: pd.DataFrame, split: str, data_version: str
) -> RunRecord:
    """What the run logs to MLflow (replayable from run.json on a fresh clone): LOGO scores per GPU."""
    comp = model.composition
    return RunRecord(
        name=tracking.XDEVICE_RUN,
        tags=tracking.model_tags(tracking.XDEVICE_RUN, model.content_hash, split, data_version),
        params={
            "trained_on": ",".join(model.op.trained_on),
            "floor_s": model.op.floor_s,
            "host_plateau_factor": metrics["host_plateau_factor"],
            "host_floor_s": comp["host_floor_s"],
            "bw_host_factor": comp["bw_host_factor"],
            "hosts": ",".join(sorted(comp["hosts"])),
            "scale": comp["scale"],
        },
        metrics=parent_metrics(metrics),
        children=held_out_runs(ops, nets),
    )
