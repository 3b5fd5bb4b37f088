"""Stage `profile@<campaign>`: measure a campaign's operations and networks into data/raw/<campaign>/.

The stage code: which params.yaml campaign, over which extract outputs, into which folders, run whole
(`run`), as shards on a cluster (`run_shard`, one per job-array task) merged afterwards (`merge`), and
the one line it prints. Planning and measuring (resumably) are opcost.measure's (profile, campaign).
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

import pandas as pd

from opcost.cputhreads import pinned_threads, threads_measured
from opcost.errors import OpcostError, some_of
from opcost.locks import device_state_dir
from opcost.measure.campaign import Campaign, Plan, all_failed_message, all_flagged_message, energy_summary
from opcost.measure.interrupts import RESUME_HINT, Interrupted
from opcost.measure.profile import campaign_plan
from opcost.measure.records import CampaignMeta, PlanSummary, ShardPlanSummary, ShardResult
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.schemas import OCCURRENCES, OPERATIONS
from opcost.stages._run import execute


def read_extract(paths: Paths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The extract stage's operations and occurrences, validated; missing: say which stage makes them."""
    if not paths.operations.is_file() or not paths.occurrences.is_file():
        raise OpcostError(f"{paths.operations} not found: run `dvc repro extract` (or `dvc pull`) first")
    return OPERATIONS.validate(pd.read_parquet(paths.operations)), OCCURRENCES.validate(
        pd.read_parquet(paths.occurrences)
    )


def stage_plan(paths: Paths, params: Params, name: str) -> Plan:
    """The plan of params.yaml campaign `name`; an unknown campaign or set is one line naming the valid ones."""
    campaigns = params.profile.campaigns
    if name not in campaigns:
        valid = ", ".join(sorted(campaigns)) or "none defined"
        raise OpcostError(f"unknown campaign {name!r}; campaigns in params.yaml: {valid}")
    c = campaigns[name]
    by_id = {s.set_id: s for s in params.extract.sets}
    set_modes = c.set_modes()
    unknown = [s for s in set_modes if s not in by_id]
    if unknown:
        raise OpcostError(
            f"campaign {name}: set(s) {some_of(unknown, 3)} not in extract.sets; "
            + (f"valid ids look like {', '.join(list(by_id)[:3])}" if by_id else "extract.sets is empty (sets.yaml?)")
        )
    ops, occ = read_extract(paths)
    return campaign_plan(c, [by_id[s] for s in set_modes], ops, occ)


def stage_campaign(paths: Paths, params: Params, name: str) -> Campaign:
    """The params.yaml campaign `name`: its plan, output folder, parts and device-state folders."""
    plan = stage_plan(paths, params, name)
    return Campaign(plan, paths.raw_dir(name), paths.parts_dir(name), state_dir=device_state_dir())


def other_threads(camp: Campaign, parts: bool = True, output: bool = True) -> set[int]:
    """The CPU thread counts, other than the campaign's `threads`, that its resumable `parts` and/or its
    complete `output` were measured with (empty when `threads` is absent: the process's count, set by
    OMP_NUM_THREADS or the core count, was never a parameter)."""
    if camp.c.threads is None:
        return set()
    envs: list[Mapping[str, Any]] = [r.get("environment") or {} for r in camp.records()] if parts else []
    done = camp.completed() if output else None
    envs += [done.get("environment") or {}] if done is not None else []
    return threads_measured(envs) - {camp.c.threads}


def _refuse_other_threads(camp: Campaign, output: bool) -> None:
    """Shards and merges do not measure afresh on their own (other shards may be running): say what to delete."""
    name, threads = camp.c.name, camp.c.threads
    for where, other in (
        (camp.parts_dir, other_threads(camp, parts=True, output=False)),
        (camp.out_dir, other_threads(camp, parts=False, output=True) if output else set()),
    ):
        if other:
            raise OpcostError(
                f"campaign {name}: {where} was measured with {', '.join(map(str, sorted(other)))} CPU thread(s), but "
                f"profile.campaigns.{name}.threads is {threads}: delete it and run the shards again, or measure "
                f"the campaign whole with `opcost profile --campaign {name} --remeasure`"
            )


def run(
    paths: Paths,
    params: Params,
    name: str,
    dry_run: bool = False,
    show_progress: bool = True,
    remeasure: bool = False,
) -> CampaignMeta | PlanSummary:
    """Stage `profile@<name>`: measure what is missing into data/raw/<name>/ (nothing if it is complete), on
    the campaign's `threads`. Output or parts measured on another thread count are measured afresh, as a
    changed setting in the fingerprint would be."""
    camp = stage_campaign(paths, params, name)
    if dry_run:
        return camp.plan.summary()
    other = other_threads(camp)
    if other and not remeasure:
        camp.say(
            f"campaign {name} was measured with {', '.join(map(str, sorted(other)))} CPU thread(s) and its "
            f"threads is now {camp.c.threads}: measuring it afresh"
        )
    with pinned_threads(camp.c.threads):
        return camp.run(show_progress, remeasure=remeasure or bool(other))


def run_shard(
    paths: Paths,
    params: Params,
    name: str,
    index: int,
    count: int,
    dry_run: bool = False,
    show_progress: bool = True,
    wait_for_device: bool = False,
) -> ShardResult | ShardPlanSummary:
    """Shard `index` of `count` of campaign `name`: parts only, merged later by `merge`."""
    camp = stage_campaign(paths, params, name)
    if dry_run:
        return {**camp.plan.shard(index, count).summary(), "shard": index, "shards": count}
    _refuse_other_threads(camp, output=False)
    with pinned_threads(camp.c.threads):
        return camp.run_shard(index, count, show_progress, wait_for_device)


def merge(paths: Paths, params: Params, name: str, count: int | None = None) -> CampaignMeta:
    """Every shard's parts of campaign `name` into data/raw/<name>/, as a local run writes them."""
    camp = stage_campaign(paths, params, name)
    _refuse_other_threads(camp, output=True)
    return camp.merge(count)


def summary(result: CampaignMeta | ShardResult) -> str:
    """What a profile run (local, shard, merge, ad hoc or an already complete campaign) did, in one line."""
    if "shard" in result:
        rows = result["rows"]
        return (
            f"profile {result['campaign']} shard {result['shard']}/{result['shards']}: {result['parts_done']} of "
            f"{result['parts']} parts done ({result['parts_resumed']} resumed), {rows['timings']} op rows, "
            f"{rows['networks']} network rows, {result['failed_rows']} failed; when every shard is done: "
            f"opcost profile --campaign {result['campaign']} --merge"
        )
    if result.get("complete"):
        landed = result.get("landed")
        how = f"landed from {landed['from']}, same parameters" if landed else "same plan and measuring code"
        energy = energy_summary(result)
        return (
            f"profile {result['campaign']}: complete ({result['planned_parts']['count']} parts, {how}); nothing to "
            f"measure{f' ({energy})' if energy else ''}. --remeasure measures it again"
        )
    energy = energy_summary(result)
    counts = result["rows"]
    return (
        f"profile {result['campaign']}: {counts['timings']} op rows, {counts['networks']} network rows, "
        f"{counts['power_samples']} power samples, {result['failed_rows']} failed, "
        f"{result['parts_resumed']} parts resumed; energy source {result['environment']['energy_source']}"
        + (f"; {energy}" if energy else "")
    )


def failure(result: CampaignMeta | ShardResult) -> str | None:
    """Why a profile run fails (exit 1): every measurement failed, or, in a run that measured, every energy row is
    flagged. A campaign already complete (pulled, or landed from elsewhere: the H200 probe, every energy row
    flagged) measured nothing now: its flagged energy does not fail `dvc repro`. A shard counts no energy rows."""
    failed = all_failed_message(result)
    if failed is not None or "shard" in result or result.get("complete"):
        return failed
    return all_flagged_message(result)


def main(argv: list[str] | None = None) -> int:
    """As `opcost profile --campaign NAME`: an interrupt says how to resume; every op failed: exit 1."""
    done: dict[str, CampaignMeta] = {}

    def args(p: Any) -> None:
        p.add_argument("--campaign", required=True, help="a campaign of params.yaml (profile.campaigns)")
        p.add_argument("--no-progress", action="store_true", help="do not draw a progress bar")
        p.add_argument("--remeasure", action="store_true", help="measure again even if the campaign is complete")

    def go(paths: Paths, params: Params, a: Any) -> CampaignMeta:
        result = run(paths, params, a.campaign, show_progress=not a.no_progress, remeasure=a.remeasure)
        assert "rows" in result  # a measuring run's result, not a dry run's plan
        done["result"] = result
        return result

    try:
        code = execute(argv, __doc__.splitlines()[0], args, go, summary)
    except Interrupted as exc:  # clocks are back, finished parts kept
        print(RESUME_HINT, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(RESUME_HINT, file=sys.stderr)
        return 130
    why = failure(done["result"]) if code == 0 else None
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
