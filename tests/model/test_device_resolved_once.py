"""A bundle's device is resolved once, when the bundle is loaded (`Bundle.device`), and passed down the answer
path: no function on it (the composition terms, the reference clock, the clock checks, the clock transfer,
the assembly, the op models' costing) looks the device config's name up in the device table again. Each op
model's encoding resolves its own name once, when it is made (`Encoding.device`); its features, roofline
offsets and the costing's charged ops (model/basis/) take the resolved device, never the name. A transferred
answer (a table GPU without an own bundle) resolves the name asked once per request, where the request enters
(`transfer_config`), and the cross-device model its training GPUs once, when it is loaded.

A spy replaces `find_device`, `device_config` and `resolve_device_config` in every opcost module that holds them
and records the code on the stack of each call: everything a question runs through is counted."""

from __future__ import annotations

import sys
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from builders import record_in_lock, tiny_bundle
from opcost import devices
from opcost.errors import OpcostError
from opcost.model.basis.features import FEATURE_SETS, Encoding, OpRecord
from opcost.model.composition.bundle import Bundle
from opcost.model.composition.costing import OpCoster
from opcost.model.prediction.answer import Request
from opcost.paths import Paths

Resolution = tuple[str, list[CodeType]]  # the name asked, the code on the stack (innermost first)
SHAPE = "2,3,32,32"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Two own bundles without a clock sweep: an A30 one and one for a host the table lacks; a clock model."""
    from opcost.model.clocks.clock import ClockModel

    tiny_bundle(tmp_path, "A30-inference")
    tiny_bundle(tmp_path, "myhost-inference")
    record_in_lock(tmp_path)
    ClockModel(static_frac=0.3, gamma=2.0, logo_error={"time": 0.05, "energy": 0.07}).save(
        Paths(tmp_path).clock_model_dir
    )
    return tmp_path


def spy(monkeypatch: pytest.MonkeyPatch) -> list[Resolution]:
    """Every call of devices.find_device / device_config / resolve_device_config from here on, wherever it was
    imported."""
    seen: list[Resolution] = []
    for name in ("find_device", "device_config", "resolve_device_config"):
        real = getattr(devices, name)

        def counted(config: str, _real: Any = real) -> Any:
            frame, stack = sys._getframe(1), []
            while frame is not None:
                stack.append(frame.f_code)
                frame = frame.f_back
            seen.append((config, stack))
            return _real(config)

        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("opcost") and getattr(module, name, None) is real:
                monkeypatch.setattr(module, name, counted)
    return seen


BUNDLE = {Bundle.__post_init__.__code__, Bundle.device.fget.__code__}  # type: ignore[attr-defined]
ENCODING = {Encoding.__post_init__.__code__}


def by_bundle(seen: list[Resolution]) -> list[str]:
    return [config for config, stack in seen if BUNDLE & set(stack)]


def by_encoding(seen: list[Resolution]) -> list[str]:
    return [config for config, stack in seen if ENCODING & set(stack)]


def elsewhere(seen: list[Resolution]) -> list[str]:
    """Resolutions neither a bundle's own nor an encoding's, when it is made: where each came from."""
    leave_out = BUNDLE | ENCODING
    return [
        f"{config!r} from {stack[0].co_qualname} ({Path(stack[0].co_filename).name})"
        for config, stack in seen
        if not leave_out & set(stack)
    ]


def test_the_answer_path_resolves_each_bundles_device_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opcost.model.prediction.predict import Predictor

    questions = [
        Request("resnet18", SHAPE, "A30", "inference", 1200.0),  # a transferred clock: the clock path runs
        Request("resnet18", SHAPE, "A30", "inference", 1440.0),  # the boost clock: the reference clock is asked
        Request("resnet18", SHAPE, "A30", "inference"),
        Request("resnet18", SHAPE, "myhost", "inference"),  # a host the table lacks: its device is None
    ]
    warm = Predictor(paths=Paths(project), disk_cache=False)
    first = warm.predict_many(questions)  # every module imported, the network extracted
    pr = Predictor(paths=Paths(project), disk_cache=False)
    pr.networks = warm.networks
    seen = spy(monkeypatch)
    got = pr.predict_many(questions)
    during = list(seen)
    pr.predict_many(questions)  # the bundles are loaded: nothing is resolved again
    again = seen[len(during) :]
    assert sorted(by_bundle(during)) == ["A30", "myhost"]  # once per bundle, at its load
    encs = [m.encoding for d in ("A30", "myhost") for m in pr.bundle(d, "inference").models.values()]
    assert sorted(by_encoding(during)) == sorted(e.device_config for e in encs)  # once per op model, at its load
    assert elsewhere(during) == [] and by_bundle(again) == [] and by_encoding(again) == [] and elsewhere(again) == []
    read = len(seen)
    assert got[2].memory is not None and got[2].fits is not None and [a.to_json() for a in got]
    assert seen[read:] == []  # reading an answer (its memory's fit on the device) resolves nothing: it carries it
    assert got[2].device == devices.device_config("A30") and got[3].device is None
    assert pr.bundle("A30", "inference").device == devices.device_config("A30")
    assert pr.bundle("myhost", "inference").device is None
    assert [a.to_json() for a in got] == [a.to_json() for a in first]  # the same answers as without the spy
    assert got[0].clock_source == "transferred" and got[1].clock_source == "measured"
    # a clock on the host the table lacks: refused in one line naming it, from its bundle's device (None)
    with pytest.raises(OpcostError, match=r"^myhost is not in the device table \(opcost/devices.py\): no clock range "
                       "or TDP to transfer the clock model with; leave out --clock$"):  # fmt: skip
        pr.predict("resnet18", SHAPE, "myhost", clock_mhz=1200.0)


@pytest.mark.parametrize("config", ["A30", "A30_no_tf32", "myhost"])
def test_the_basis_takes_the_resolved_device_never_the_name(config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encoding resolves its device config once, when it is made; its rows, roofline offsets (every feature
    set, the `physical` one's GEMM baselines among them) and a costing's charged ops resolve nothing again."""
    from torch import nn

    from builders import module_record

    recs = [module_record(nn.Conv2d(3, 64, 7, 2, 3), (8, 3, 64, 64)), module_record(nn.Conv2d(8, 8, 3, groups=8),
            (8, 8, 32, 32)), module_record(nn.Linear(64, 32), (8, 64))]  # fmt: skip
    mystery = OpRecord("m", "Mystery", {}, (8, 64), 512, {"flops": 10**9, "bytes_read": 10**6, "bytes_written": 10**6})
    seen = spy(monkeypatch)
    encs = [Encoding(fs, ("Conv2d", "Linear"), config, 5e-6, 0.1, 0.5, 0.4, 0.2, 0.3) for fs in FEATURE_SETS]
    assert [c for c, _ in seen] == [config] * len(FEATURE_SETS) == by_encoding(seen)  # once each, when made
    del seen[:]
    for enc in encs:
        enc.matrix([(r, None) for r in recs]), enc.matrix([(r, 1200.0) for r in recs], cached=True)
        enc.log_offset(recs)
    coster = OpCoster("inference", encs[0].device, {}, ("Linear",), 1e-5, 60.0, 2.0, 100.0)
    assert coster.cost([mystery]).source == ["charged"]
    assert seen == []
    assert encs[0].device == devices.find_device(config) and (encs[0].device is None) == (config == "myhost")


def test_a_bundle_resolves_a_reassigned_device_config_anew() -> None:
    """The resolved device follows `device_config` where a caller reassigns it (a mutable dataclass)."""
    from builders import small_bundle

    b = small_bundle()
    assert b.device_config == "X" and b.device is None
    b.device_config = "A30_no_tf32"
    assert b.device == devices.DeviceConfig(devices.DEVICES["A30"], False)


def test_a_question_that_is_not_a_request_is_refused_in_one_line_before_any_work(project: Path) -> None:
    from opcost.model.prediction.predict import Predictor

    pr = Predictor(paths=Paths(project), disk_cache=False)
    good = Request("resnet18", (1, 3, 32, 32), "A30", "inference")
    with pytest.raises(OpcostError) as err:
        pr.predict_many([good, ("resnet18", (1, 3, 32, 32), "A30", "inference", None)])  # type: ignore[list-item]
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("question 1 of predict_many is a tuple, not an ")
    assert "Request(model, input_shape, device, mode, clock_mhz=None)" in msg
    assert not pr.bundles.loaded  # refused before any bundle was loaded


@pytest.fixture
def xproject(project: Path) -> Path:
    """`project` plus a cross-device model (fitted on synthetic rows of four table GPUs) and a power model: the
    GPUs without an own bundle are answered by transfer, with energy."""
    import numpy as np
    import pandas as pd

    from builders import FAST_XDEVICE, synthetic_xdevice_rows
    from opcost.model.clocks.xpower import PowerModel
    from opcost.model.crossdevice import xdevice

    rng = np.random.default_rng(4)
    rows = pd.concat([synthetic_xdevice_rows(rng, n=15).query("device_config == 'SYN0'").assign(device_config=cfg)
                      for cfg in ("V100_no_tf32", "P100_no_tf32", "A30", "RTX2080Ti")], ignore_index=True)  # fmt: skip
    comp = {"host_floor_s": 5e-6, "scale": 1.0, "bw_ratio": {"linear": 2.0}}
    op = xdevice.fit(rows, FAST_XDEVICE)
    xdevice.XdeviceModel(op, comp, {"a": 0.2, "b": 0.05}).save(Paths(project).xdevice_model_dir)
    PowerModel(idle=0.3, a=0.2, b=0.5, c=1.0, rel_err90=0.1).save(Paths(project).xpower_model_dir)
    return project


def test_a_transferred_answer_resolves_the_name_asked_once_per_request(
    xproject: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each transferred request resolves its device name once, in `transfer_config`, and passes the DeviceConfig
    down (the op rows, the optimizer step, energy, busy share, the clock range and transfer); the cross-device model
    resolves its training GPUs once, when it is loaded; a second identical round resolves only the names asked."""
    from opcost.model.crossdevice.xdevice import OpModel
    from opcost.model.prediction import xdevice_predict
    from opcost.model.prediction.predict import Predictor

    questions = [
        Request("resnet18", SHAPE, "H100", "inference"),
        Request("resnet18", SHAPE, "NVIDIA L4", "training", 1200.0),  # an NVML name, at a clock
        Request("resnet18", SHAPE, "T4_no_tf32", "inference", 900.0),
        Request("resnet18", SHAPE, "A30", "training"),  # a training GPU of the cross-device model: fitted
    ]
    warm = Predictor(paths=Paths(xproject), disk_cache=False)
    first = warm.predict_many(questions)  # every module imported, the networks extracted
    monkeypatch.setattr(xdevice_predict, "_MODELS", {})  # the cross-device model is loaded again below
    pr = Predictor(paths=Paths(xproject), disk_cache=False)
    pr.networks = warm.networks
    seen = spy(monkeypatch)
    got = pr.predict_many(questions)
    during = list(seen)
    pr.predict_many(questions)
    again = seen[len(during) :]
    load = {OpModel.trained_devices.func.__code__}  # type: ignore[attr-defined]
    loaded = xdevice_predict.load(Paths(xproject).xdevice_model_dir).op.trained_on
    assert sorted(c for c, stack in during if load & set(stack)) == sorted(loaded)  # once each, at the load
    asked = [f"{q.device!r} from transfer_config (xdevice_predict.py)" for q in questions]
    assert elsewhere([(c, stack) for c, stack in during if not load & set(stack)]) == asked
    assert elsewhere(again) == asked  # nothing beyond the names asked, once each
    read = len(seen)
    assert got[0].memory is not None and got[0].fits is not None and [a.to_json() for a in got]
    assert seen[read:] == []  # reading a transferred answer resolves nothing either
    assert [a.device for a in got] == [devices.device_config(q.device) for q in questions]
    assert [a.to_json() for a in got] == [a.to_json() for a in first]  # the same answers as without the spy
    assert [a.composition for a in got] == ["cross-device"] * 4 and got[3].fitted is not None
    assert got[0].energy_j is not None and got[1].clock_source == got[2].clock_source == "transferred"
