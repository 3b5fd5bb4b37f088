"""Stage `profile@<campaign>`: measure a campaign's operations and networks into data/raw/<campaign>/.

A thin entry point over `opcost.measure.profile`, which plans, measures (resumably) and writes the
campaign's timings, power samples, networks and campaign.json.
"""

from __future__ import annotations

import sys
from typing import Any

from opcost.measure import profile as prof
from opcost.measure.campaign import all_failed_message
from opcost.measure.interrupts import RESUME_HINT, Interrupted
from opcost.params.load import Params
from opcost.paths import Paths
from opcost.stages._run import execute


def run(
    paths: Paths, params: Params, campaign: str, show_progress: bool = True, remeasure: bool = False
) -> dict[str, Any]:
    return prof.run_stage(paths, params, campaign, dry_run=False, show_progress=show_progress, remeasure=remeasure)


def summary(result: dict[str, Any]) -> str:
    return prof.summary_line(result)


def main(argv: list[str] | None = None) -> int:
    """As `opcost profile --campaign NAME`: an interrupt says how to resume; every op failed: exit 1."""
    done: dict[str, Any] = {}

    def args(p: Any) -> None:
        p.add_argument("--campaign", required=True, help="a campaign of params.yaml (profile.campaigns)")
        p.add_argument("--no-progress", action="store_true", help="do not draw a progress bar")
        p.add_argument("--remeasure", action="store_true", help="measure again even if the campaign is complete")

    def go(paths: Paths, params: Params, a: Any) -> dict[str, Any]:
        done["result"] = run(paths, params, a.campaign, not a.no_progress, a.remeasure)
        return done["result"]

    try:
        code = execute(argv, __doc__.splitlines()[0], args, go, summary)
    except Interrupted as exc:  # clocks are back, finished parts kept
        print(RESUME_HINT, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(RESUME_HINT, file=sys.stderr)
        return 130
    failure = all_failed_message(done["result"]) if code == 0 else None
    if failure is not None:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
