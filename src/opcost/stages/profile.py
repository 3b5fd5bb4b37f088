"""Stage `profile@<campaign>`: measure a campaign's operations and networks into data/raw/<campaign>/.

A thin entry point over `opcost.measure.profile`, which plans, measures (resumably) and writes the
campaign's timings, power samples, networks and campaign.json.
"""

from __future__ import annotations

import sys
from typing import Any

from opcost.config import Params, Paths
from opcost.measure import profile as prof
from opcost.stages._run import execute


def run(paths: Paths, params: Params, campaign: str, show_progress: bool = True) -> dict[str, Any]:
    return prof.run_stage(paths, params, campaign, dry_run=False, show_progress=show_progress)


def summary(result: dict[str, Any]) -> str:
    rows = result["rows"]
    return (
        f"profile {result['campaign']}: {rows['timings']} op rows, {rows['networks']} network rows, "
        f"{rows['power_samples']} power samples, {result['failed_rows']} failed, "
        f"{result['parts_resumed']} parts resumed; energy source {result['environment']['energy_source']}"
    )


def main(argv: list[str] | None = None) -> int:
    def args(p: Any) -> None:
        p.add_argument("--campaign", required=True, help="a campaign of params.yaml (profile.campaigns)")
        p.add_argument("--no-progress", action="store_true", help="do not draw a progress bar")

    return execute(
        argv,
        __doc__.splitlines()[0],
        args,
        lambda paths, params, a: run(paths, params, a.campaign, show_progress=not a.no_progress),
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
