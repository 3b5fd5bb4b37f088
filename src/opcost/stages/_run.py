"""The shared `main()` of the stage modules: find the project, load params, run, print one line."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from opcost.config import Params, Paths, find_root, load_params
from opcost.errors import OpcostError


def execute(
    argv: list[str] | None,
    describe: str,
    add_args: Callable[[argparse.ArgumentParser], object],
    run: Callable[[Paths, Params, argparse.Namespace], Any],
    summary: Callable[[Any], str],
) -> int:
    """Parse `argv`, run the stage for the project around the working directory; user errors are one
    line on stderr and exit status 2, as in the CLI."""
    parser = argparse.ArgumentParser(description=describe)
    add_args(parser)
    args = parser.parse_args(argv)
    try:
        paths = Paths(find_root())
        result = run(paths, load_params(paths.params), args)
    except OpcostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(result))
    return 0
