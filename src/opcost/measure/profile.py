"""`opcost profile`: a campaign from params.yaml (the DVC stage) or from command-line options.

A params.yaml campaign runs whole (`run_stage`), or as shards on a cluster (`run_shard_stage`,
one per job-array task) merged afterwards (`merge_stage`); see opcost.measure.campaign."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from opcost.errors import OpcostError
from opcost.locks import device_state_dir
from opcost.measure.campaign import Campaign, Plan, make_plan, units_from_op_ids, units_from_sets
from opcost.params.extract import ModelInputSet
from opcost.params.load import Params
from opcost.params.profile import CampaignParams
from opcost.paths import Paths
from opcost.schemas import OCCURRENCES, OPERATIONS


def _read_extract(paths: Paths) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not paths.operations.is_file() or not paths.occurrences.is_file():
        raise OpcostError(f"{paths.operations} not found: run `dvc repro extract` (or `dvc pull`) first")
    return OPERATIONS.validate(pd.read_parquet(paths.operations)), OCCURRENCES.validate(
        pd.read_parquet(paths.occurrences)
    )


def stage_plan(paths: Paths, params: Params, name: str) -> Plan:
    campaigns = params.profile.campaigns
    if name not in campaigns:
        valid = ", ".join(sorted(campaigns)) or "none defined"
        raise OpcostError(f"unknown campaign {name!r}; campaigns in params.yaml: {valid}")
    c = campaigns[name]
    by_id = {s.set_id: s for s in params.extract.sets}
    unknown = [s for s in c.sets if s not in by_id]
    if unknown:
        raise OpcostError(
            f"campaign {name}: set(s) {', '.join(unknown)} not in extract.sets; valid ids look like "
            f"{', '.join(list(by_id)[:3])}"
        )
    ops, occ = _read_extract(paths)
    units = units_from_sets([by_id[s] for s in c.sets], c.modes, occ, ops, c.networks)
    units += units_from_op_ids(c.op_ids, c.modes, ops)
    return make_plan(c, units)


def stage_campaign(paths: Paths, params: Params, name: str) -> Campaign:
    """The params.yaml campaign `name`: its plan, output folder, parts and device-state folders."""
    plan = stage_plan(paths, params, name)
    return Campaign(plan, paths.raw_dir(name), paths.parts_dir(name), state_dir=device_state_dir())


def run_stage(
    paths: Paths,
    params: Params,
    name: str,
    dry_run: bool = False,
    show_progress: bool = True,
    remeasure: bool = False,
) -> dict[str, Any]:
    """Stage `profile@<name>`: measure what is missing into data/raw/<name>/ (nothing if it is complete)."""
    camp = stage_campaign(paths, params, name)
    if dry_run:
        return camp.plan.summary()
    return camp.run(show_progress, remeasure=remeasure)


def run_shard_stage(
    paths: Paths,
    params: Params,
    name: str,
    index: int,
    count: int,
    dry_run: bool = False,
    show_progress: bool = True,
    wait_for_device: bool = False,
) -> dict[str, Any]:
    """Shard `index` of `count` of campaign `name`: parts only, merged later by `merge_stage`."""
    camp = stage_campaign(paths, params, name)
    if dry_run:
        return {**camp.plan.shard(index, count).summary(), "shard": index, "shards": count}
    return camp.run_shard(index, count, show_progress, wait_for_device)


def merge_stage(paths: Paths, params: Params, name: str, count: int | None = None) -> dict[str, Any]:
    """Every shard's parts of campaign `name` into data/raw/<name>/, as a local run writes them."""
    return stage_campaign(paths, params, name).merge(count)


def adhoc_plan(campaign: CampaignParams, models: Sequence[ModelInputSet]) -> Plan:
    from opcost.ops.catalog import extract_sets, occurrences_frame, operations_frame

    catalog = extract_sets(models, show_progress=False)
    units = units_from_sets(
        models, campaign.modes, occurrences_frame(catalog), operations_frame(catalog), campaign.networks
    )
    return make_plan(campaign, units)


def run_adhoc(
    campaign: CampaignParams,
    models: Sequence[ModelInputSet],
    out: Path,
    dry_run: bool = False,
    show_progress: bool = True,
    remeasure: bool = False,
) -> dict[str, Any]:
    plan = adhoc_plan(campaign, [replace(m, modes=campaign.modes) for m in models])
    if dry_run:
        return plan.summary()
    out = Path(out)
    state_dir = device_state_dir()
    return Campaign(plan, out, out / ".parts", state_dir=state_dir).run(show_progress, remeasure=remeasure)


def summary_line(result: dict[str, Any]) -> str:
    """What a profile run (local, shard, merge or an already complete campaign) did, in one line."""
    rows = result["rows"]
    if "shard" in result:
        return (
            f"profile {result['campaign']} shard {result['shard']}/{result['shards']}: {result['parts_done']} of "
            f"{result['parts']} parts done ({result['parts_resumed']} resumed), {rows['timings']} op rows, "
            f"{rows['networks']} network rows, {result['failed_rows']} failed; when every shard is done: "
            f"opcost profile --campaign {result['campaign']} --merge"
        )
    if result.get("complete"):
        return (
            f"profile {result['campaign']}: complete ({result['planned_parts']['count']} parts, same plan and "
            f"measuring code); nothing to measure. --remeasure measures it again"
        )
    return (
        f"profile {result['campaign']}: {rows['timings']} op rows, {rows['networks']} network rows, "
        f"{rows['power_samples']} power samples, {result['failed_rows']} failed, "
        f"{result['parts_resumed']} parts resumed; energy source {result['environment']['energy_source']}"
    )
