"""Host and GPU apart: an eager PyTorch step as a CPU thread that issues ops and a GPU stream that runs them.

Why: on a fast GPU an eager network waits on its host. A per-op max(kernel, host floor) charges every op the
slower of the two as if host and GPU took turns; in a real step the host runs ahead while the GPU works on
a long kernel, and the GPU idles only when the queue runs dry. So:
- the host issues the calls in order, each costing its host time (Python, the ATen dispatcher, the launch);
- the GPU starts a call's kernel once the host has issued it and the previous kernel is done;
- the step ends when both are done.

An op with `c` identical consecutive calls (a network's calls are counted per op) needs no loop over its
calls: with host cost h and kernel time g, after the run the host is at H + c h and the GPU is done at
max(E + c g, H + h + c g, H + c h + g), the last kernel's end over the three ways the queue can run (the GPU
busy throughout, the GPU waiting only for the first issue, or the GPU waiting on every issue).
Known answers: a host-bound chain (h >= g) takes the sum of its host costs plus the last kernel; a
GPU-bound chain (g >= h) the first host cost plus the sum of its kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np


@dataclass(frozen=True)
class QueueTime:
    """One step through the queue: its time, and how long each side was busy."""

    time_s: float
    host_s: float  # the host's busy time: the sum of its per-call costs
    gpu_s: float  # the GPU's busy time: the sum of its kernels

    @property
    def host_bound_share(self) -> float:
        """The share of the step the GPU sits idle waiting for the host (0: never)."""
        return float(max(0.0, 1.0 - self.gpu_s / self.time_s)) if self.time_s > 0 else 0.0


def run_queue(host_s: Iterable[float], gpu_s: Iterable[float], calls: Iterable[float]) -> QueueTime:
    """The step of ops issued in order; op i is `calls[i]` consecutive calls, each `host_s[i]` of host time and
    `gpu_s[i]` of kernel time (0: a call that launches nothing, such as a view)."""
    h_arr, g_arr, c_arr = (np.asarray(list(x), float) for x in (host_s, gpu_s, calls))
    if not (len(h_arr) == len(g_arr) == len(c_arr)):
        raise ValueError(f"run_queue: {len(h_arr)} host costs, {len(g_arr)} kernel times, {len(c_arr)} call counts")
    if (h_arr < 0).any() or (g_arr < 0).any() or (c_arr < 0).any() or not np.isfinite([h_arr, g_arr, c_arr]).all():
        raise ValueError("run_queue: host costs, kernel times and call counts must be finite and >= 0")
    host = gpu = 0.0  # the host's clock after its last issue; the GPU's after its last kernel
    for h, g, c in zip(h_arr.tolist(), g_arr.tolist(), c_arr.tolist()):
        if c <= 0:
            continue
        if g > 0:
            gpu = max(gpu + c * g, host + h + c * g, host + c * h + g)
        host += c * h
    return QueueTime(max(host, gpu), float((h_arr * c_arr).sum()), float((g_arr * c_arr).sum()))


def step_queue(t_fw: np.ndarray, calls: np.ndarray, host_fw: np.ndarray, bw_ratio: np.ndarray | None = None,
               bw_host_factor: float = 1.0) -> QueueTime:  # fmt: skip
    """A network step: the forward ops in order; in training (`bw_ratio` given) then their backward in reverse
    order, each op's backward kernel `bw_ratio` x its forward kernel and its host cost `bw_host_factor` x the
    forward's (the autograd engine issues backward calls from C++, without the forward's Python)."""
    t_fw, calls, host_fw = (np.asarray(x, float) for x in (t_fw, calls, host_fw))
    if bw_ratio is None:
        return run_queue(host_fw, t_fw, calls)
    t_bw = np.asarray(bw_ratio, float) * t_fw
    return run_queue(np.concatenate([host_fw, bw_host_factor * host_fw[::-1]]),
                     np.concatenate([t_fw, t_bw[::-1]]), np.concatenate([calls, calls[::-1]]))  # fmt: skip


__all__ = ["QueueTime", "run_queue", "step_queue"]
