"""The host/GPU queue (model/crossdevice/hostqueue.py): known answers for host-bound and GPU-bound chains, and the
closed form for a run of identical calls against a call-by-call simulation written here from the definition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opcost.model.crossdevice.hostqueue import run_queue


def test_a_host_bound_chain_takes_the_sum_of_its_host_costs_plus_the_last_kernel():
    # every kernel (3 us) is shorter than its issue (13 us): the GPU waits on the host throughout
    q = run_queue([13e-6, 13e-6, 13e-6], [3e-6, 3e-6, 3e-6], [1, 10, 5])
    assert q.time_s == pytest.approx(16 * 13e-6 + 3e-6)
    assert q.host_s == pytest.approx(16 * 13e-6) and q.gpu_s == pytest.approx(16 * 3e-6)
    assert q.host_bound_share == pytest.approx(1 - 16 * 3e-6 / (16 * 13e-6 + 3e-6))


def test_a_gpu_bound_chain_takes_the_first_issue_plus_the_sum_of_its_kernels():
    q = run_queue([5e-6, 5e-6], [1e-3, 2e-3], [4, 3])
    assert q.time_s == pytest.approx(5e-6 + 4e-3 + 6e-3)
    assert q.host_bound_share == pytest.approx(1 - 10e-3 / (10e-3 + 5e-6))


def test_the_host_runs_ahead_during_a_long_kernel():
    # one 1 ms kernel, then 50 small host-bound calls: issued while the long kernel runs, they run after it
    q = run_queue([10e-6, 10e-6], [1e-3, 2e-6], [1, 50])
    assert q.time_s == pytest.approx(10e-6 + 1e-3 + 50 * 2e-6)
    # a per-op max(kernel, host) would have charged 1 ms + 50 x 10 us
    assert q.time_s < 1e-3 + 50 * 10e-6


def test_views_cost_host_time_only_and_bad_input_is_refused():
    assert run_queue([2e-6], [0.0], [7]).time_s == pytest.approx(14e-6)
    assert run_queue([], [], []).time_s == 0.0
    with pytest.raises(ValueError, match="2 host costs, 1 kernel times"):
        run_queue([1e-6, 1e-6], [1e-6], [1, 1])
    with pytest.raises(ValueError, match="finite and >= 0"):
        run_queue([1e-6], [float("nan")], [1])


def simulate(host, gpu, calls):
    """The queue call by call, from its definition: the host issues, the GPU runs each kernel after its issue
    and after the previous kernel."""
    t_host = t_gpu = 0.0
    for h, g, c in zip(host, gpu, calls):
        for _ in range(c):
            t_host += h
            if g > 0:
                t_gpu = max(t_gpu, t_host) + g
    return max(t_host, t_gpu)


ops = st.lists(
    st.tuples(
        st.floats(0, 1e-3, allow_nan=False),
        st.one_of(st.just(0.0), st.floats(1e-7, 1e-3, allow_nan=False)),
        st.integers(0, 12),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_closed_form_equals_the_call_by_call_queue(items):
    host, gpu, calls = ([x[i] for x in items] for i in range(3))
    q = run_queue(host, gpu, calls)
    assert q.time_s == pytest.approx(simulate(host, gpu, calls), rel=1e-9, abs=1e-15)
    # never faster than either side alone, never slower than the two taking turns
    assert max(q.host_s, q.gpu_s) <= q.time_s * (1 + 1e-9) + 1e-15
    assert q.time_s <= q.host_s + q.gpu_s + 1e-12


def test_a_host_bound_training_step_pays_forward_and_backward_issues():
    from opcost.model.crossdevice.hostqueue import step_queue

    # forward 20 us of host per call, backward half of it; every kernel shorter than its issue
    q = step_queue([1e-6, 2e-6], [3, 2], [20e-6, 20e-6], bw_ratio=[2.0, 2.0], bw_host_factor=0.5)
    assert q.time_s == pytest.approx(5 * 20e-6 + 5 * 10e-6 + 2 * 1e-6)  # the last kernel: op 0's backward
    # GPU-bound: the first issue plus every forward and backward kernel
    q = step_queue([1e-3, 2e-3], [1, 1], [5e-6, 5e-6], bw_ratio=[2.0, 1.0], bw_host_factor=0.5)
    assert q.time_s == pytest.approx(5e-6 + 3e-3 + 2e-3 + 2e-3)
