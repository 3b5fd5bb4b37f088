"""FLOPs and bytes of the GPU-FREQUENCY-DVFS kernels (src/opcost/data/clock_kernels.csv) and the roofline-share
path they feed (issue 21 section 6): hand-computed entries of the table, refusal of bad tables, the share and the
explained fraction at a curve's reference point, the blend with the fallback share, and a validation that never
fits on the held-out GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opcost.data.clock_kernels import CLOCK_KERNELS_FILE, clock_kernels, read_clock_kernels
from opcost.devices import DEVICES
from opcost.errors import OpcostError
from opcost.model.clocks import clockval
from opcost.model.clocks.clock import (
    KERNEL_SOURCE,
    ClockModel,
    explained_fraction,
    fit,
    kernel_shares,
    reference_clock_share,
    sweep_curves,
)
from opcost.schemas import SWEEPS
from opcost.tables import read_table


def test_table_entries_are_the_loop_nests_flops_and_compulsory_bytes():
    """Hand-computed from the kernels' loop bodies and the sizes their size_source names (4-byte floats)."""
    t = clock_kernels()
    assert t["gemm/gemm_kernel"] == (512 * 512 * (3 * 512 + 1), 4 * (512 * 512 + 512 * 512 + 2 * 512 * 512))
    assert t["3mm/mm3_kernel1"] == (2 * 512**3, 4 * 3 * 512 * 512)
    assert t["2mm/mm2_kernel1"][0] == 3 * 1024**3  # tmp += alpha * A * B: two multiplies and an add per k
    assert t["fdtd2d/step3"] == (5 * 2048 * 2048, 4 * 4 * 2048 * 2048)  # hz read and written, ex and ey read
    assert t["jacobi2d/kernel2"] == (0, 4 * 2 * 1000 * 1000)  # a copy: no arithmetic
    assert t["gramschmidt/kernel3"][0] == 4 * 2048 * (2048 - 1024 - 1)  # columns j > k = NJ / 2 only
    assert t["doitgen/kernel1"] == (128 * 128 * 128 * 2, 4 * 3 * 128 * 128)  # one r of the 3-D contraction
    raw = pd.read_csv(CLOCK_KERNELS_FILE)
    assert raw["size_source"].str.len().min() > 20 and raw["formula"].str.contains("flops = ").all()
    assert raw["kernel"].is_unique and len(raw) == len(t)


def test_sizes_are_physically_possible_on_the_gpu_that_ran_them(pipeline_root):
    """A wrong (too large) size would show as a kernel moving more bytes or FLOPs per second than the RTX 3080 Ti
    can at its reference point: none does (a check of the sizes, never used by the model)."""
    pts, _ = sweep_curves(read_table(pipeline_root.evaluated_sweeps, SWEEPS, "evaluate"))
    ref = pts[pts["is_ref"] & (pts["source"] == KERNEL_SOURCE)].drop_duplicates("curve")
    dev = DEVICES["RTX3080Ti"]
    table = clock_kernels()
    ref = ref[ref["kernel"].isin(list(table))]
    assert ref["kernel"].nunique() == len(table)  # every listed kernel is a kernel of the sweep
    flops = ref["kernel"].map(lambda k: table[k][0]).to_numpy(float)
    nbytes = ref["kernel"].map(lambda k: table[k][1]).to_numpy(float)
    bw = dev.bandwidth * ref["mem_ratio"].to_numpy(float)
    peak = dev.fp32_flops * ref["f_ref"].to_numpy(float) / dev.boost_clock_mhz
    assert (nbytes / ref["t_ref"].to_numpy(float) <= 1.05 * bw).all()
    assert (flops / ref["t_ref"].to_numpy(float) <= peak).all()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("kernel,flops,bytes\ngemm/gemm_kernel,1,2\n", "expected the columns"),
        ("kernel,flops,bytes,size_source,formula\ngemm,1,2,src,f\n", "not of the form"),
        ("kernel,flops,bytes,size_source,formula\na/b,-1,2,src,f\n", "flops = '-1'"),
        ("kernel,flops,bytes,size_source,formula\na/b,1,x,src,f\n", "bytes = 'x', expected a number"),
        ("kernel,flops,bytes,size_source,formula\na/b,1,0,src,f\n", "expected > 0"),
        ("kernel,flops,bytes,size_source,formula\na/b,1,2,,f\n", "size_source is empty"),
        ("kernel,flops,bytes,size_source,formula\na/b,1,2,s,f\na/b,1,2,s,f\n", "listed twice"),
    ],
)
def test_a_bad_table_is_refused_in_one_line_naming_the_file_and_line(tmp_path, text, says):
    path = tmp_path / "k.csv"
    path.write_text(text)
    with pytest.raises(OpcostError) as err:
        read_clock_kernels(path)
    msg = str(err.value)
    assert says in msg and str(path) in msg and "\n" not in msg
    with pytest.raises(OpcostError, match="cannot read"):
        read_clock_kernels(tmp_path / "missing.csv")


def _points(kernels: list[str], mem_ratio: float = 0.5, t_ref: float = 1e-3) -> pd.DataFrame:
    dev = DEVICES["RTX3080Ti"]
    rows = []
    for k in kernels:
        for f in (1000.0, 1500.0, 1950.0):
            rows.append({"source": KERNEL_SOURCE, "device": "RTX3080Ti", "kernel": k, "workload": f"{k}@mem1",
                         "curve": k, "f": f, "f_ref": 1950.0, "f_boost": dev.boost_clock_mhz, "mem_ratio": mem_ratio,
                         "t_ref": t_ref, "is_ref": f == 1950.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_kernel_shares_are_the_roofline_split_at_the_reference_clock_and_memory_clock():
    """Known answer: peak = FP32 peak x f_ref / f_boost, bandwidth = nominal x memory-clock ratio; the share is
    t_c / (t_c + t_m), the weight (t_c + t_m) / t_ref capped at 1; a kernel the table lacks gets NaN both."""
    dev = DEVICES["RTX3080Ti"]
    flops, nbytes = 2e9, 1e8
    pts = _points(["w/k", "w/unknown"]).assign(t_ref=lambda d: np.where(d["kernel"] == "w/k", 1e-3, 1e-3))
    share, weight = kernel_shares(pts, {"w/k": (flops, nbytes)})
    tc = flops / (dev.fp32_flops * 1950.0 / dev.boost_clock_mhz)
    tm = nbytes / (dev.bandwidth * 0.5)
    k = (pts["kernel"] == "w/k").to_numpy()
    assert share[k] == pytest.approx(np.full(3, tc / (tc + tm)))
    assert weight[k] == pytest.approx(np.full(3, (tc + tm) / 1e-3))
    assert np.isnan(share[~k]).all() and np.isnan(weight[~k]).all()
    other = pts.assign(source="nv-dvfs-kernels")  # the table speaks for the GPU-FREQUENCY-DVFS kernels only
    assert np.isnan(kernel_shares(other, {"w/k": (flops, nbytes)})[0]).all()
    assert explained_fraction(1.0, 1.0, 1.0, 1.0, 1.0) == pytest.approx(1.0)  # capped: 2 s of roofline in 1 s
    assert explained_fraction(0.0, 0.0, 1.0, 1.0, 1.0) == pytest.approx(0.0)


def test_a_share_speaks_for_its_weight_of_the_time_and_the_fallback_for_the_rest():
    """Known answer: with weight w the time law uses w s + (1 - w) s_fb, s_fb the fallback share at the reference
    clock; weight 1 (or NaN) is the given share alone, weight 0 the fallback alone."""
    m = ClockModel(share_a=0.3, share_b=-0.8, share_balance=-0.4)
    f, f_ref, f_boost, t_ref, p_ref, tdp = np.array([900.0, 1300.0]), 1950.0, 1665.0, 2e-3, 250.0, 350.0
    s_fb = float(reference_clock_share(m.share_from_power(p_ref, tdp, 37.0, 0.5), f_ref, f_boost))

    def t(share, weight=None):
        return m.predict(f, f_ref, t_ref, p_ref, tdp, np.full(2, share), f_boost=f_boost, balance=37.0,
                         mem_ratio=0.5, share_weight=None if weight is None else np.full(2, weight))[0]  # fmt: skip

    assert t(0.9, 0.0) == pytest.approx(t(np.nan))
    assert t(0.9, 1.0) == pytest.approx(t(0.9)) and t(0.9, np.nan) == pytest.approx(t(0.9))
    assert t(0.9, 0.25) == pytest.approx(t(0.25 * 0.9 + 0.75 * s_fb))
    assert t(0.9, 0.25) == pytest.approx(t_ref * (1 + (0.25 * 0.9 + 0.75 * s_fb) * (f_ref / f - 1)))


def test_kernel_path_validation_never_fits_on_the_held_out_gpu(pipeline_root):
    """The RTX 3080 Ti's kernel paths come from a fit on the other GPUs only (spy), cover every one of its curves,
    and the path without FLOPs reproduces its leave-one-GPU-out figures exactly."""
    pts, _ = sweep_curves(read_table(pipeline_root.evaluated_sweeps, SWEEPS, "evaluate"))
    seen: list[set[str]] = []

    def spy(train: pd.DataFrame):
        seen.append(set(train["device"]))
        return fit(train)

    rows = pd.concat(clockval.kernel_path_validation(pts, spy), ignore_index=True).set_index("share_path")
    assert seen == [set(pts["device"]) - {"RTX3080Ti"}]
    assert list(rows.index) == list(clockval.KERNEL_PATHS) and set(rows["device"]) == {"RTX3080Ti"}
    rtx = pts[pts["device"] == "RTX3080Ti"]
    assert (rows["curves"] == rtx["curve"].nunique()).all()
    assert 0 < rows["curves_with_flops"].iloc[0] < rtx["curve"].nunique()
    logo = clockval.summarise(clockval.curve_scores(clockval.leave_one_gpu_out(pts)[0]), ["device"])
    ref = logo.set_index("device").loc["RTX3080Ti"]
    none = rows.loc["P_ref/TDP (no FLOPs)"]
    assert none["time_mape"] == pytest.approx(ref["time_mape"]) and none["energy_mape"] == pytest.approx(
        ref["energy_mape"]
    )
    assert rows.loc["roofline I/(I+ridge)", "time_mape"] != pytest.approx(none["time_mape"])


def test_an_edited_table_without_its_new_hash_is_refused(monkeypatch):
    """DVC sees the loader, not the CSV: the loader names the table's SHA-256, so an edit must touch both."""
    import opcost.data.clock_kernels as ck

    ck.clock_kernels.cache_clear()
    monkeypatch.setattr(ck, "CLOCK_KERNELS_SHA256", "0" * 64)
    with pytest.raises(OpcostError, match="set CLOCK_KERNELS_SHA256"):
        ck.clock_kernels()
    ck.clock_kernels.cache_clear()
    monkeypatch.undo()
    assert len(ck.clock_kernels()) == len(pd.read_csv(CLOCK_KERNELS_FILE))
