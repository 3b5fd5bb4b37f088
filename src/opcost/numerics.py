"""numpy at its baseline kernels, BLAS on one thread with fixed kernels, in opcost's own processes: a stage's
numbers on any x86 CPU.

numpy chooses, when it is imported, the widest kernels the CPU runs (AVX2, AVX-512). Their `log` and `exp`
differ from the baseline kernels' in the last bit, and a random forest split on a feature one ulp apart
grows another tree: a retrain on an AVX-512 machine moved a report's figure by 10 % (docs/architecture.md,
"Reruns on another machine"). numpy reads NPY_DISABLE_CPU_FEATURES once, at its import, so the stage
modules and the CLI set it first; a process that imported numpy before keeps its kernels (`pinned` tells).
BLAS splits some reductions over its threads, and takes as many as the machine has cores, and OpenBLAS picks its
kernels by CPU: one thread and one kernel set (BLAS_THREADS, BLAS_CORE, read at BLAS's load too) make the sum order
the same on any x86 machine. The fits' matrices are small, so neither costs anything measurable. A library user's
process is left alone.
"""

from __future__ import annotations

import os
import platform
import sys

ENV = "NPY_DISABLE_CPU_FEATURES"
# numpy's dispatch targets above its baselines (x86-64-v2; aarch64's ASIMD): names a platform lacks are ignored
DISPATCH_TARGETS = ("X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR", "ASIMDHP", "ASIMDDP", "ASIMDFHM", "SVE")
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # numpy's and scipy's OpenBLAS, or an MKL build
# OpenBLAS's kernels for any x86-64-v2 CPU (numpy's own baseline), with fixed block sizes: the same sums everywhere
BLAS_CORE = {"OPENBLAS_CORETYPE": "Nehalem"}


def pin_numpy_kernels() -> bool:
    """Have numpy, once imported, run its baseline kernels only (a target the user disabled stays disabled), and
    BLAS one thread. False where numpy was imported already and runs wider kernels: too late to change them."""
    if "numpy" in sys.modules:
        return pinned()
    have = os.environ.get(ENV, "").split()
    os.environ[ENV] = " ".join(dict.fromkeys([*have, *DISPATCH_TARGETS]))
    os.environ.update(BLAS_THREADS)
    if on_x86():
        os.environ.update(BLAS_CORE)
    return True


def on_x86() -> bool:
    """Whether OpenBLAS's x86 kernel sets (BLAS_CORE) exist here."""
    return platform.machine().lower() in ("x86_64", "amd64")


def pinned() -> bool:
    """Whether every numpy function this process calls runs its baseline kernel, and its BLAS one thread (with
    Nehalem's kernels on x86)."""
    from numpy.lib.introspect import opt_func_info

    infos = opt_func_info().values()
    kernels = all(sig["current"].startswith("baseline") for by_sig in infos for sig in by_sig.values())
    cores = blas_cores() <= {BLAS_CORE["OPENBLAS_CORETYPE"]} if on_x86() else True  # elsewhere: not pinned
    return kernels and blas_threads() == {1} and cores


def blas_threads() -> set[int]:
    """The thread counts of the BLAS libraries this process loaded (threadpoolctl, installed with scikit-learn;
    without it, what the environment asks of OpenBLAS)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # a measuring machine with numpy and torch only
        return {int(os.environ.get("OPENBLAS_NUM_THREADS", "0"))}
    return {int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"}


def blas_cores() -> set[str]:
    """The kernel sets ("architecture") of the OpenBLAS libraries this process loaded (none known: empty)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return set()
    return {str(p["architecture"]) for p in threadpool_info() if p.get("internal_api") == "openblas"}
