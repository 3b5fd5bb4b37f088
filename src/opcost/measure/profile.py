"""Planning a campaign over extracted operations, and `opcost profile`'s ad-hoc campaigns (from
command-line options, over model-input sets traced on the spot).

The params.yaml campaigns (the DVC stage `profile@<name>`: which campaign, which folders, the summary
line) are stage code, in opcost.stages.profile; measuring is opcost.measure.campaign's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import pandas as pd

from opcost.locks import device_state_dir
from opcost.measure.campaign import Campaign, Plan, make_plan, units_from_op_ids, units_from_sets
from opcost.measure.records import CampaignMeta, PlanSummary
from opcost.params.extract import ModelInputSet
from opcost.params.profile import CampaignParams


def campaign_plan(
    campaign: CampaignParams, sets: Sequence[ModelInputSet], operations: pd.DataFrame, occurrences: pd.DataFrame
) -> Plan:
    """The plan of `campaign` over extracted `operations`/`occurrences`: the units of its model-input `sets`
    (their networks too where the campaign measures networks) and of its extra op ids, in its modes."""
    modes = campaign.set_modes()
    units = units_from_sets(
        sets, campaign.modes, occurrences, operations, campaign.networks, campaign.set_ops, set_modes=modes
    )
    units += units_from_op_ids(campaign.op_ids, campaign.modes, operations)
    return make_plan(campaign, units)


def adhoc_plan(campaign: CampaignParams, models: Sequence[ModelInputSet]) -> Plan:
    from opcost.ops.catalog import extract_sets, occurrences_frame, operations_frame

    catalog = extract_sets(models, show_progress=False)
    return campaign_plan(campaign, models, operations_frame(catalog), occurrences_frame(catalog))


def run_adhoc(
    campaign: CampaignParams,
    models: Sequence[ModelInputSet],
    out: Path,
    dry_run: bool = False,
    show_progress: bool = True,
    remeasure: bool = False,
) -> CampaignMeta | PlanSummary:
    plan = adhoc_plan(campaign, [replace(m, modes=campaign.modes) for m in models])
    if dry_run:
        return plan.summary()
    out = Path(out)
    state_dir = device_state_dir()
    return Campaign(plan, out, out / ".parts", state_dir=state_dir).run(show_progress, remeasure=remeasure)
