"""Stage `train-xdevice`: the cross-device op-time model, judged leave-one-GPU-out, and its registration.

Reads NeuSight's op and network measurements (params `xdevice.neusight`) and the thesis' evaluated
targets (`xdevice.op_targets` for ops, `xdevice.net_targets` for networks). Then:
1. leave-one-GPU-out over every GPU with op measurements (model/crossdevice/xdevice.py): per GPU and op kind
   MAPE, median APE, time-weighted error and R² (on log time), beside NeuSight's own out-of-
   distribution errors;
2. leave-one-GPU-out at network level (model/crossdevice/xdevice_net.py): every network of the held-out GPU
   (NeuSight end-to-end configs, thesis networks) composed from the fold's op model and a composition
   fitted on the other GPUs' networks;
3. the op model and the composition fitted on everything, with the interval law (90 % |log error|
   of held-out GPUs' networks against their distance from the training GPUs), its coverage and width
   per held-out GPU;
4. a new GPU from one measured network (model/crossdevice/fewshot.py): on each GPU with several measured networks,
   each in turn measured, the others predicted without and with it, by models that never saw the GPU;
   the campaign GPUs of models/measured (the H200) with the final model, which never saw them either.
Writes models/xdevice/ (xdevice.json, trees.npz, run.json) and reports/xdevice/{logo_ops.csv,
logo_networks.csv, fewshot.csv, metrics.json}; replays the run into MLflow and registers `opcost-xdevice`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pandas as pd

from opcost.devices import device_config
from opcost.errors import OpcostError
from opcost.io import atomic_path, write_report
from opcost.model.crossdevice import fewshot, hosts, measured, runrecord, xdevice, xdevice_net, xinterval
from opcost.model.crossdevice.xdevice_net import net_scores
from opcost.model.records import runlog, tracking
from opcost.model.store import registry
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import TARGET_OPERATIONS
from opcost.stages._run import execute_logged
from opcost.tables import read_table

XDEVICE_MODEL, XDEVICE_RUN = tracking.XDEVICE_MODEL, tracking.XDEVICE_RUN


def op_rows(paths: Paths, params: Params) -> pd.DataFrame:
    xp = params.xdevice
    frames = [xdevice.neusight_ops(paths.root / xp.neusight)]
    for target in xp.op_targets:
        cfg, _, _mode = target.rpartition("-")
        f = paths.target_operations(target)
        if not f.is_file():
            raise OpcostError(f"{f} not found: `dvc pull` or `dvc repro evaluate` first (xdevice.op_targets)")
        frames.append(xdevice.thesis_ops(read_table(f, TARGET_OPERATIONS, "evaluate"), cfg))
    return pd.concat(frames, ignore_index=True)


def net_rows(paths: Paths, params: Params) -> tuple[pd.DataFrame, pd.DataFrame]:
    n1, d1 = xdevice_net.neusight_networks(paths.root / params.xdevice.neusight)
    n2, d2 = xdevice_net.thesis_networks(paths, list(params.xdevice.net_targets))
    return pd.concat([n1, n2], ignore_index=True), pd.concat([d1, d2], ignore_index=True)


def campaign_gpus(paths: Paths) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(networks, nodes, op rows) of the GPUs our campaigns measured (models/measured) that no op model
    trains on: their evaluated networks (targets `<config>-<mode>`, measured by the reference host's
    machine) and their measured ops' GPU times as device-time op rows (model/crossdevice/measured.op_rows_measured)."""
    table = measured.load(paths.measured_ops_dir)
    cfgs = sorted(table["devices"])
    targets = [f"{c}-{m}" for c in cfgs for m in ("inference", "training")]
    nets, nodes = xdevice_net.thesis_networks(paths, targets)
    if len(nets):
        nets = nets.assign(set="campaign", host=hosts.REFERENCE_HOST)
    rows = [
        {**r, "t_s": t, "device_config": c, "wall_clock": 0.0, "source": "campaign"}
        for c in cfgs
        for r, t in measured.op_rows_measured(paths.measured_ops_dir, c)
    ]
    return nets, nodes, pd.DataFrame(rows)


def few_shot(paths: Paths, rows: pd.DataFrame, nets: pd.DataFrame, nodes: pd.DataFrame, folds: dict[str, Any],
             final: xdevice.OpModel, net_pred: pd.DataFrame, host_set: dict[str, Any],
             factor: float) -> pd.DataFrame:  # fmt: skip
    """The few-shot table (model/crossdevice/fewshot.evaluate) over the training GPUs (their folds) and the campaign
    GPUs (the final model: trained on none of them)."""
    table = fewshot.evaluate(nets, nodes, rows, xdevice.host_bound(rows, factor), folds, net_pred, host_set)
    c_nets, c_nodes, c_rows = campaign_gpus(paths)
    if c_nets.empty or c_rows.empty:
        return table
    extra = fewshot.evaluate(
        pd.concat([nets, c_nets], ignore_index=True),
        pd.concat([nodes, c_nodes], ignore_index=True),
        c_rows,
        np.zeros(len(c_rows), bool),
        {g: final for g in sorted(c_nets["gpu"].unique()) if g not in final.trained_on},
        net_pred,
        host_set,
    )
    return pd.concat([table, extra], ignore_index=True)


def host_profiles(paths: Paths, params: Params, rows: pd.DataFrame) -> dict[str, hosts.HostProfile]:
    """The measuring hosts' profiles (model/crossdevice/hosts.py): each thesis host's per-kind plateau of its wall-clock
    op rows, and each `xdevice.host_campaigns` host's median per-call enqueue time (inference rows)."""
    from opcost.ops.kinds import xkind_of
    from opcost.schemas import TIMINGS

    out: dict[str, hosts.HostProfile] = {}
    wall = rows[rows["wall_clock"].to_numpy(float) > 0]
    for cfg_host, d in wall.groupby(wall["device_config"].map(xdevice_net.thesis_host)):
        out[str(cfg_host)] = hosts.plateau_profile(
            str(cfg_host),
            d["xkind"].to_numpy(),
            d["t_s"].to_numpy(float),
            xdevice.HOST_PLATEAU_ROWS,
            f"the thesis' wall-clock op rows of {', '.join(sorted(set(d['device_config'])))}: per kind, the plateau "
            "of its small calls",
        )
    for name, campaigns in params.xdevice.host_campaigns:
        frames = []
        for c in campaigns:
            f = paths.raw_dir(c) / "timings.parquet"
            if not f.is_file():
                raise OpcostError(
                    f"{f} not found: `dvc pull` or `dvc repro profile@{c}` first (xdevice.host_campaigns)"
                )
            frames.append(read_table(f, TIMINGS, f"profile@{c}"))
        t = pd.concat(frames, ignore_index=True)
        t = t[(t["mode"] == "inference") & (t["status"] == "ok")]
        out[name] = hosts.timings_profile(
            name,
            np.array([xkind_of(k) for k in t["kind"]]),
            t["host_time_per_call_s"].to_numpy(float),
            f"per-call enqueue times (host_time_per_call_s) of campaigns {', '.join(campaigns)}, inference",
        )
    return out


def run(paths: Paths, params: Params, log_to_mlflow: bool = True) -> dict[str, Any]:
    xp = params.xdevice
    rows = op_rows(paths, params)
    nets, nodes = net_rows(paths, params)

    folds: dict[str, xdevice.OpModel] = {}
    pred = xdevice.leave_one_gpu_out(rows, xp, on_fold=lambda g, m: folds.__setitem__(g, m))
    ops_table = xdevice.logo_table(pred)
    host_set = host_profiles(paths, params, rows)
    net_pred = xdevice_net.logo_networks(nets, nodes, folds, host_set)

    final = xdevice.fit(rows, xp)
    ratios = xdevice_net.bw_ratios(nodes, set(final.trained_on))
    all_nodes = nodes.reset_index(drop=True)
    comp = xdevice_net.fit_composition(nets.reset_index(drop=True), all_nodes,
                                       final.predict(all_nodes.assign(wall_clock=0.0)), ratios,
                                       host_set)  # fmt: skip
    devs = {g: device_config(g).device for g in folds}
    dist = {g: xdevice.distance(devs[g], [v for k, v in devs.items() if k != g]) for g in devs}
    held_out = pd.DataFrame({
        "gpu": net_pred["gpu"].astype(str),
        "distance": net_pred["gpu"].map(dist).astype(float),
        "other_share": net_pred["other_share"].astype(float),
        "abs_log_error": np.abs(np.log(net_pred["predicted_s"] / net_pred["measured_s"])),
    })  # fmt: skip
    law = xinterval.fit(held_out)
    few = few_shot(paths, rows, nets, nodes, folds, final, net_pred, host_set, xp.host_plateau_factor)
    # in-sample: the shipped law (fitted on every GPU's networks) on those same networks
    hw = [xinterval.halfwidth(law, x, s) for x, s in zip(held_out["distance"], held_out["other_share"])]
    inside = held_out["abs_log_error"].to_numpy(float) <= np.array(hw)
    out_of_sample = xinterval.coverage(held_out)
    pooled = ops_table[ops_table["gpu"] == "all"].set_index("group")
    metrics: dict[str, Any] = {
        "ops": {
            g: {k: float(r[k]) for k in ("mape", "mape_gpu_mean", "mdape", "twe", "r2_log", "goal_mape")}
            | {
                "n": int(r["n"]),
                "neusight_ood_mape": None if pd.isna(r["neusight_ood_mape"]) else float(r["neusight_ood_mape"]),
            }  # fmt: skip
            for g, r in pooled.iterrows()
        },
        "networks": {s: net_scores(net_pred[net_pred["set"] == s]) for s in sorted(net_pred["set"].unique())}
        | {"all": net_scores(net_pred)},
        "networks_by_gpu": {f"{g}/{s}": net_scores(d) for (g, s), d in net_pred.groupby(["gpu", "set"])},
        "interval": {
            **law,
            "coverage_90": out_of_sample["coverage_90"],
            "median_width_pct": out_of_sample["median_width_pct"],
            "median_halfwidth_pct": out_of_sample["median_halfwidth_pct"],
            "coverage_90_in_sample": float(inside.mean()),
            "n": int(len(inside)),
            "per_gpu": out_of_sample["per_gpu"],
            "goal_coverage": [0.85, 0.95],
            "goal_median_halfwidth_pct": 25.0,
        },  # fmt: skip
        "fewshot": fewshot.summary(few),
        "composition": {k: v for k, v in comp.items() if k not in ("bw_ratio", "hosts")},
        "hosts": {n: {"default_us": 1e6 * p["default_s"], "source": p["source"]} for n, p in comp["hosts"].items()},
        "bw_ratio": comp["bw_ratio"],
        "trained_on": list(final.trained_on),
        "rows": int(len(rows)),
        "host_plateau_factor": xp.host_plateau_factor,
        "host_bound_rows": int(xdevice.host_bound(rows, xp.host_plateau_factor).sum()),
        "anchors": {
            "neusight_network_pct": "0.1-27.9 per config",
            "habitat_network_pct": 11.8,
            "goal_network_mape": 10.0,
        },  # fmt: skip
    }
    model = xdevice.XdeviceModel(final, comp, law, {"ops": metrics["ops"], "networks": metrics["networks"]})
    folder = paths.xdevice_model_dir
    model.save(folder)
    model.content_hash = registry.xdevice_hash(folder)  # what sync-registry recomputes on a fresh clone
    model.save(folder)
    split = f"logo-{'+'.join(sorted(folds))}"
    data_version = registry.stage_data_version(paths.root, XDEVICE_RUN)  # what sync-registry tags it with
    record = runrecord.build(model, metrics, ops_table, net_pred, split, data_version).as_dict()
    runlog.save(record, folder)
    paths.xdevice_report_dir.mkdir(parents=True, exist_ok=True)
    write_report(metrics, paths.xdevice_metrics)
    for name, df in (("logo_ops", ops_table), ("logo_networks", net_pred), ("fewshot", few)):
        with atomic_path(paths.xdevice_table(name)) as tmp:
            df.to_csv(tmp, index=False, float_format="%.6g")
    registered = None
    if log_to_mlflow:
        mlflow = tracking.setup(paths.root)
        with runlog.replayed(mlflow, record, tracking.source_tags(paths.root)):
            score = -float(metrics["networks"]["all"]["mape"])
            mlflow.log_metric(tracking.XDEVICE_SCORE_METRIC, score)
            registered = registry.register_folder(
                paths.root, mlflow, XDEVICE_MODEL, folder, model.content_hash, score, split, {}, data_version
            )
    return {"metrics": metrics, "registered_version": registered}


def summary(r: dict[str, Any]) -> str:
    m = r["metrics"]
    lines = []
    for g, s in m["ops"].items():
        anchor = f"; NeuSight {s['neusight_ood_mape']:.1f} %" if s["neusight_ood_mape"] is not None else ""
        lines.append(
            f"ops {g:11s} leave-one-GPU-out MAPE {s['mape']:.1f} % (per-GPU mean {s['mape_gpu_mean']:.1f} %, "
            f"median {s['mdape']:.1f} %, time-weighted {s['twe']:.1f} %, R2(log) {s['r2_log']:.3f}; goal "
            f"{s['goal_mape']:.0f} %{anchor}) n={s['n']}"
        )
    for s, v in m["networks"].items():
        lines.append(f"networks {s}: MAPE {v['mape']:.1f} % (median {v['mdape']:.1f} %, max {v['max_ape']:.1f} %) "
                     f"over {v['n']}; goal 10 %")  # fmt: skip
    iv = m["interval"]
    lines.append(f"interval: 90 % coverage {100 * iv['coverage_90']:.0f} % (law fitted without the scored GPU; "
                 f"median width {iv['median_width_pct']:.0f} %; in-sample {100 * iv['coverage_90_in_sample']:.0f} %) "
                 f"over {iv['n']} held-out networks")  # fmt: skip
    reg = r["registered_version"]
    lines.append(f"registered {XDEVICE_MODEL} version {reg}" if reg else "registry: nothing new to register")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return execute_logged(argv, __doc__.splitlines()[0], run, summary)


if __name__ == "__main__":
    sys.exit(main())
