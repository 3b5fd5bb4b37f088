"""Warm sequential predictions (issue: warm predict() under 0.1 s): each op's predicted value memoised per
trained model (model/composition/predcache.py), and models/ listed once per BundleStore with a staleness check
(model/store/bundlestore.py). Answers are the uncached answers exactly; a retrained model, a patched device
table or a new bundle on disk is never answered from the old state."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
from torch import nn

from builders import module_record as _record
from opcost import devices
from opcost.devices import DEVICES
from opcost.model.basis import features
from opcost.model.basis.features import Encoding, OpRecord, RowCache, with_kind
from opcost.model.basis.trees import TreeEnsemble
from opcost.model.composition.bundle import BUNDLE_FILE, QuantityModel
from opcost.model.store import bundlestore
from opcost.model.store.bundlestore import BundleStore
from opcost.paths import Paths


@pytest.fixture(scope="module")
def records() -> list[OpRecord]:
    return [
        _record(nn.Conv2d(3, 64, 7, 2, 3, bias=False), (32, 3, 224, 224)),  # 3.8 GFLOP
        _record(nn.Conv2d(64, 64, 3, 1, 1, groups=64), (32, 64, 56, 56)),
        _record(nn.Linear(512, 1000), (32, 512)),
        _record(nn.BatchNorm2d(64), (32, 64, 112, 112)),
    ]


ENC = Encoding("improved", ("BatchNorm2d", "Conv2d", "Linear"), "A30", floor_s=5e-6)
SPLIT = math.log1p(1e9)  # one split on log FLOPs: ops of a GFLOP or more take the right leaf


def _model(low: float, high: float, transform: str = "log") -> QuantityModel:
    """A one-split tree on log FLOPs with known leaves: exp(leaf) is the answer (`log`), or the answer
    over the roofline time plus floor (`log_roofline`)."""
    ens = TreeEnsemble(
        feature=np.array([[ENC.columns.index("log_flops"), 0, 0]], np.int32),
        threshold=np.array([[SPLIT, 0.0, 0.0]]),
        left=np.array([[1, 1, 2]], np.int32),
        right=np.array([[2, 1, 2]], np.int32),
        value=np.array([[0.0, math.log(low), math.log(high)]]),
        depth=1,
        strict_less=True,
        base=0.0,
        average=False,
    )
    return QuantityModel("xgb-improved", ens, ENC, transform)


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows each tree evaluation was asked about, one entry per call."""
    monkeypatch.setattr(features, "ROW_CACHE", RowCache())
    calls: list[int] = []
    real = TreeEnsemble.predict

    def predict(self: TreeEnsemble, X: np.ndarray) -> np.ndarray:
        calls.append(len(X))
        return real(self, X)

    monkeypatch.setattr(TreeEnsemble, "predict", predict)
    return calls


def test_cached_values_are_the_uncached_values_and_known_answers(records, evaluated):
    qm = _model(2e-5, 3e-4)
    items = [(r, c) for c in (None, 1410.0) for r in records]
    want = [3e-4 if r.metrics["flops"] >= 1e9 else 2e-5 for r, _ in items]
    assert {*want} == {2e-5, 3e-4}  # both leaves are reached
    uncached = qm.predict(items, cached=False)
    first, second = qm.predict(items), qm.predict(items)
    assert np.array_equal(first, uncached) and np.array_equal(second, uncached)
    assert first == pytest.approx(want, rel=1e-12)
    # uncached: every row; first cached call: every row; second: none
    assert evaluated == [len(items), len(items)]
    assert len(qm.cache) == len(items)  # one entry per (clock, record content)


def test_only_the_ops_not_seen_are_evaluated_and_in_the_asked_order(records, evaluated):
    qm = _model(2e-5, 3e-4)
    qm.predict([(records[0], None), (records[2], None)])
    mixed = [(records[3], None), (records[0], None), (records[1], None), (records[0], 1410.0)]
    got = qm.predict(mixed)
    assert evaluated == [2, 3]  # records[0] at the default clock was cached; at 1410 MHz it is another key
    assert np.array_equal(got, qm.predict(mixed, cached=False))


def test_a_proxy_of_an_op_is_not_served_the_op_s_value(records, evaluated):
    """Same content, other kind (model/composition/costing.py's proxies keep their op's id and content key)."""
    qm = _model(2e-5, 3e-4)
    bn = records[3]
    as_linear = with_kind(bn, "Linear")
    a, b = qm.predict([(bn, None)]), qm.predict([(as_linear, None)])
    assert evaluated == [1, 1]
    assert np.array_equal(b, qm.predict([(as_linear, None)], cached=False)) and np.array_equal(a, a)


def test_a_retrained_model_is_never_served_the_old_values(records, evaluated):
    old, new = _model(2e-5, 3e-4), _model(4e-5, 6e-4)  # a retrained bundle: new instances, other trees
    items = [(r, None) for r in records]
    before = old.predict(items)
    after = new.predict(items)
    assert after == pytest.approx(2 * before, rel=1e-12)
    assert evaluated == [len(items), len(items)]


def test_trees_swapped_into_a_model_are_evaluated_not_served_the_old_values(records, evaluated):
    qm = _model(2e-5, 3e-4)
    items = [(r, None) for r in records]
    before = qm.predict(items)
    qm.ensemble = _model(4e-5, 6e-4).ensemble  # same instance, other trees
    assert qm.predict(items) == pytest.approx(2 * before, rel=1e-12)
    assert evaluated == [len(items), len(items)]


def test_the_trees_of_a_cached_model_cannot_change_under_it(records):
    qm = _model(2e-5, 3e-4)
    qm.predict([(records[0], None)])
    with pytest.raises(ValueError, match="read-only"):
        qm.ensemble.value[0, 2] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        qm.ensemble._value[2] = 0.0


@pytest.fixture
def fresh_device_memo():
    """The device table's lookups are memoised (devices.py): cleared around a patch of the table."""
    memos = (devices.device_config, devices.find_device)
    for m in memos:
        m.cache_clear()
    yield
    for m in memos:
        m.cache_clear()


def test_a_patched_device_table_empties_the_cache(records, evaluated, monkeypatch, fresh_device_memo):
    """log(t / roofline) models read the device table: an encoding made under another entry (equal to the old
    one field by field: the entry is resolved once, when the encoding is made) gets another answer, not the
    cached one."""
    qm = _model(1.5, 1.5, "log_roofline")  # every op takes 1.5 x its roofline time plus floor
    items = [(r, None) for r in records]
    before = qm.predict(items)
    a30 = DEVICES["A30"]
    monkeypatch.setitem(DEVICES, "A30", dataclasses.replace(a30, bandwidth=a30.bandwidth / 4))
    devices.device_config.cache_clear(), devices.find_device.cache_clear()
    assert qm.encoding.device is not None and qm.encoding.device.device is a30  # resolved once: the old entry
    qm.encoding = dataclasses.replace(qm.encoding)  # made under the patched table
    assert qm.encoding == ENC and qm.encoding.device is not None and qm.encoding.device.device is DEVICES["A30"]
    after = qm.predict(items)
    assert evaluated == [len(items), len(items)]
    assert np.array_equal(after, qm.predict(items, cached=False))
    assert not np.array_equal(after, before)
    assert after == pytest.approx(1.5 * np.exp(qm.encoding.log_roofline(records)), rel=1e-12)


# -- models/ listed once, seen again when it changes -------------------------------------------------


def _bundle_folder(root: Path, target: str, age_s: float = 100.0) -> Path:
    folder = root / "models" / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BUNDLE_FILE).write_text("{}")
    _age(folder, age_s)
    return folder


def _age(path: Path, age_s: float = 100.0) -> None:
    """Stamps old enough that a listing of them is reused (bundlestore.RACY_S)."""
    t = time.time() - age_s
    os.utime(path, (t, t))


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = os.scandir

    def scandir(path):  # noqa: ANN001, ANN202
        calls.append(str(path))
        return real(path)

    monkeypatch.setattr(bundlestore.os, "scandir", scandir)
    return calls


def test_models_is_listed_once_while_nothing_changes(tmp_path, listings):
    _bundle_folder(tmp_path, "A30-inference")
    (tmp_path / "models" / "notes").mkdir()  # a folder without a bundle is no target
    _age(tmp_path / "models" / "notes")
    _age(tmp_path / "models")
    store = BundleStore(Paths(tmp_path))
    assert [store.targets() for _ in range(5)] == [["A30-inference"]] * 5
    assert len(listings) == 1


def test_a_new_bundle_written_after_the_listing_is_seen(tmp_path, listings):
    _bundle_folder(tmp_path, "A30-inference")
    (tmp_path / "models" / "RTX2080Ti-inference").mkdir()  # a train stage's folder, bundle not yet written
    _age(tmp_path / "models" / "RTX2080Ti-inference")
    _age(tmp_path / "models")
    store = BundleStore(Paths(tmp_path))
    assert store.targets() == ["A30-inference"]
    (tmp_path / "models" / "RTX2080Ti-inference" / BUNDLE_FILE).write_text("{}")  # `dvc repro` writes it
    assert store.targets() == ["A30-inference", "RTX2080Ti-inference"]
    _bundle_folder(tmp_path, "A30-training", age_s=0.0)  # a new target folder
    assert store.targets() == ["A30-inference", "A30-training", "RTX2080Ti-inference"]
    (tmp_path / "models" / "A30-inference" / BUNDLE_FILE).unlink()  # removed: no longer a target
    assert store.targets() == ["A30-training", "RTX2080Ti-inference"]


def test_a_listing_of_recent_changes_is_not_reused(tmp_path, listings):
    """Within the file system's clock tick a second change can keep the stamp: such a listing is redone."""
    _bundle_folder(tmp_path, "A30-inference", age_s=0.0)
    store = BundleStore(Paths(tmp_path))
    store.targets(), store.targets()
    assert len(listings) == 2


def test_no_models_folder_means_no_targets_and_a_later_one_is_seen(tmp_path):
    store = BundleStore(Paths(tmp_path))
    assert store.targets() == []
    _bundle_folder(tmp_path, "A30-inference")
    assert store.targets() == ["A30-inference"]


def test_the_listing_is_what_a_glob_of_models_says(tmp_path):
    for t in ("RTX2080Ti-training", "A30-inference", "A30_no_tf32-inference"):
        _bundle_folder(tmp_path, t)
    (tmp_path / "models" / "xdevice").mkdir()
    (tmp_path / "models" / "stray.json").write_text("{}")
    glob = sorted(p.parent.name for p in (tmp_path / "models").glob(f"*/{BUNDLE_FILE}"))
    assert BundleStore(Paths(tmp_path)).targets() == glob == ["A30-inference", "A30_no_tf32-inference",
                                                              "RTX2080Ti-training"]  # fmt: skip
