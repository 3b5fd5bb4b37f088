"""numpy's SIMD kernels held at its baseline in opcost's own processes: a stage's numbers on any x86 CPU.

numpy chooses, when it is imported, the widest kernels the CPU runs (AVX2, AVX-512). Their `log` and `exp`
differ from the baseline kernels' in the last bit, and a random forest split on a feature one ulp apart
grows another tree: a retrain on an AVX-512 machine moved a report's figure by 10 % (docs/architecture.md,
"Reruns on another machine"). numpy reads NPY_DISABLE_CPU_FEATURES once, at its import, so the stage
modules and the CLI set it first; a process that imported numpy before keeps its kernels (`pinned` tells).
A library user's process is left alone.
"""

from __future__ import annotations

import os
import sys

ENV = "NPY_DISABLE_CPU_FEATURES"
# numpy's dispatch targets above its baselines (x86-64-v2; aarch64's ASIMD): names a platform lacks are ignored
DISPATCH_TARGETS = ("X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR", "ASIMDHP", "ASIMDDP", "ASIMDFHM", "SVE")


def pin_numpy_kernels() -> bool:
    """Have numpy, once imported, run its baseline kernels only (a target the user disabled stays disabled).
    False where numpy was imported already and runs wider kernels: too late to change them."""
    if "numpy" in sys.modules:
        return pinned()
    have = os.environ.get(ENV, "").split()
    os.environ[ENV] = " ".join(dict.fromkeys([*have, *DISPATCH_TARGETS]))
    return True


def pinned() -> bool:
    """Whether every numpy function this process calls runs its baseline kernel."""
    from numpy.lib.introspect import opt_func_info

    return all(sig["current"].startswith("baseline") for by_sig in opt_func_info().values() for sig in by_sig.values())
