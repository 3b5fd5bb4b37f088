"""Stage processes and the CLI run numpy's baseline kernels and BLAS on one thread: the same last bits on any CPU.

Each check runs in a fresh interpreter: numpy chooses its kernels once, at its import, so a test process
that imported numpy already cannot show it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from subproc_env import src_dir

PINNED = "from opcost.numerics import pinned; print(pinned())"


def _run(code: str, **env: str) -> str:
    pins = ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE")
    base = {k: v for k, v in os.environ.items() if k not in pins}
    p = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": src_dir(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def wide_kernels() -> None:
    """Skip where this CPU runs numpy's baseline anyway: there the checks below cannot tell a pin apart."""
    if _run(f"import numpy; {PINNED}") == "True":
        pytest.skip("numpy runs its baseline kernels on this CPU without any pin")


def test_a_stage_process_runs_numpy_at_its_baseline(wide_kernels: None) -> None:
    assert _run(f"import opcost.stages, numpy; {PINNED}") == "True"


def test_the_cli_runs_numpy_at_its_baseline(wide_kernels: None) -> None:
    code = (
        "import sys, contextlib; sys.argv = ['opcost', '--help']; from opcost import cli\n"
        "with contextlib.suppress(SystemExit): cli.main()\n"
        f"import numpy; {PINNED}"
    )
    assert _run(code) == "True"


def test_a_process_that_imported_numpy_first_is_told_it_is_not_pinned(wide_kernels: None) -> None:
    assert _run("import numpy; from opcost.numerics import pin_numpy_kernels; print(pin_numpy_kernels())") == "False"


def test_the_pin_keeps_what_the_user_disabled_and_adds_every_dispatch_target() -> None:
    code = (
        "import os; from opcost.numerics import pin_numpy_kernels; pin_numpy_kernels()\n"
        "print(os.environ['NPY_DISABLE_CPU_FEATURES'])"
    )
    got = _run(code, NPY_DISABLE_CPU_FEATURES="FOO X86_V4").split()
    assert got[0] == "FOO" and got.count("X86_V4") == 1
    assert {"X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"} <= set(got)


def test_baseline_log_gives_the_same_bits_as_the_c_library() -> None:
    """What the pin buys: numpy's baseline float64 log is the C library's, as Python's math.log is."""
    code = (
        "import opcost.stages, math, numpy as np\n"
        "x = np.random.default_rng(0).random(20000) * 1e3 + 1e-9\n"
        "print(all(float(a) == math.log(b) for a, b in zip(np.log(x), x)))"
    )
    assert _run(code) == "True"


def test_a_stage_process_runs_blas_on_one_thread() -> None:
    """BLAS takes one thread per core unless told: a stage process tells it one, numpy's and scipy's alike."""
    code = "import opcost.stages, numpy, scipy.linalg; from opcost.numerics import blas_threads; print(blas_threads())"
    assert _run(code) == "{1}"
    if (os.cpu_count() or 1) > 1:  # without the pin: as many as the cores (what made the sum order machine-bound)
        assert (
            _run("import numpy, scipy.linalg; from opcost.numerics import blas_threads; print(blas_threads())") != "{1}"
        )


def test_a_stage_process_runs_openblas_on_one_kernel_set_on_any_x86_cpu() -> None:
    """OpenBLAS picks its kernels and block sizes by CPU unless told: a stage process runs Nehalem's on any x86."""
    from opcost.numerics import on_x86

    if not on_x86():
        pytest.skip("OpenBLAS's x86 kernel sets exist on x86 only")
    code = (
        "import opcost.stages, numpy, scipy.linalg; from opcost.numerics import blas_cores; print(sorted(blas_cores()))"
    )
    assert _run(code) == "['Nehalem']"
