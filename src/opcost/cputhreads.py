"""The CPU thread count of a measuring process: a campaign's `threads` (params.yaml, CampaignParams).

Applied for the whole measuring run, before its first op: torch's intra-op pool always, its inter-op pool
where torch still allows it (only before any inter-op work in the process; after that torch refuses and
the pool stays as it is, which a campaign of single ops does not use). OMP_NUM_THREADS and MKL_NUM_THREADS
are set for the same span, so an interpreter the run starts uses the same count; a SLURM shard runs
`opcost profile --shard I/N` in its own interpreter, which reads params.yaml and pins itself. The intra-op
count and the environment are put back afterwards, so a test or an API caller keeps its own setting (the
inter-op pool cannot be resized twice in a process; it keeps the campaign's count).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Mapping, Sequence

import torch

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def pinned_threads(n: int | None) -> Iterator[None]:
    """Within the block torch computes on `n` CPU threads (None: leave the process as it is)."""
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    env_before = {k: os.environ.get(k) for k in THREAD_ENV}
    torch.set_num_threads(n)
    if torch.get_num_interop_threads() != n:
        with contextlib.suppress(RuntimeError):  # "cannot set ... after parallel work has started"
            torch.set_num_interop_threads(n)
    os.environ.update({k: str(n) for k in THREAD_ENV})
    try:
        yield
    finally:
        torch.set_num_threads(before)
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def threads_measured(environments: Sequence[Mapping[str, Any]]) -> set[int]:
    """The CPU thread counts recorded in measured environments (campaign.json, run records)."""
    return {int(e["cpu_threads"]) for e in environments if e and e.get("cpu_threads") is not None}
