"""The row cache of warm predictions (model/basis/features.py): the same numbers as encoding afresh, rows
encoded once per (layout, clock, record content), and no two different records sharing a row."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from torch import nn

from builders import module_record as _record
from opcost import devices
from opcost.model.basis import features
from opcost.model.basis.features import Encoding, OpRecord, RowCache, with_kind
from opcost.model.basis.trees import TreeEnsemble
from opcost.model.composition.bundle import QuantityModel


@pytest.fixture(scope="module")
def records() -> list[OpRecord]:
    return [
        _record(nn.Conv2d(3, 64, 7, 2, 3, bias=False), (32, 3, 224, 224)),
        _record(nn.Conv2d(64, 64, 3, 1, 1, groups=64), (32, 64, 56, 56)),
        _record(nn.Linear(512, 1000), (32, 512)),
        _record(nn.BatchNorm2d(64), (32, 64, 112, 112)),
        _record(nn.ReLU(), (32, 64, 112, 112)),
    ]


LAYOUTS = [
    Encoding("baseline", ("BatchNorm2d", "Conv2d", "Linear", "ReLU")),
    Encoding("improved", ("BatchNorm2d", "Conv2d", "Linear", "ReLU"), "A30", floor_s=5e-6),
    Encoding(
        "physical",
        ("BatchNorm2d", "Conv2d", "Linear"),
        "A30_no_tf32",
        floor_s=5e-6,
        dw_efficiency=0.3,
        tf32_efficiency=0.5,
        fp32_efficiency=0.8,
    ),  # fmt: skip
]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, float | None]]:
    """Every `Encoding.row` call: (feature set, record kind, clock)."""
    calls: list[tuple[str, str, float | None]] = []
    real = Encoding.row

    def row(self: Encoding, rec: OpRecord, clock: float | None) -> list[float]:
        calls.append((self.feature_set, rec.kind, clock))
        return real(self, rec, clock)

    monkeypatch.setattr(Encoding, "row", row)
    return calls


@pytest.mark.parametrize("enc", LAYOUTS, ids=lambda e: e.feature_set)
@pytest.mark.parametrize("clock", [None, 1410.0])
def test_cached_rows_are_the_uncached_rows_exactly(records, enc, clock):
    cache = RowCache()
    items = [(r, clock) for r in records]
    fresh = enc.matrix(items)
    first = cache.matrix(enc, items)
    again = cache.matrix(enc, items)  # served from the cache
    assert fresh.shape == (len(records), len(enc.columns))
    assert np.array_equal(first, fresh) and np.array_equal(again, fresh)
    assert len(cache) == len(records)


def test_the_second_call_encodes_nothing_and_the_uncached_path_always_encodes(records, spy):
    enc = LAYOUTS[1]
    items = [(r, None) for r in records]
    cache = RowCache()
    cache.matrix(enc, items)
    assert len(spy) == len(records)
    cache.matrix(enc, items[::-1])  # order does not matter
    cache.matrix(enc, [(r, None) for r in records[:2]])
    assert len(spy) == len(records)
    cache.matrix(enc, [(r, 1410.0) for r in records[:2]])  # another clock: its own rows
    assert len(spy) == len(records) + 2
    enc.matrix(items)  # training: no cache
    assert len(spy) == 2 * len(records) + 2


def test_a_proxy_made_afresh_finds_its_rows_and_is_encoded_under_its_own_kind(records, spy):
    relu = records[-1]
    enc = LAYOUTS[2]  # knows no ReLU: costing proxies it (model/composition/costing.py)
    cache = RowCache()
    proxy = cache.matrix(enc, [(with_kind(relu, "BatchNorm2d"), None)])
    cache.matrix(enc, [(with_kind(relu, "BatchNorm2d"), None)])  # a new proxy object, the same content
    assert spy == [("physical", "BatchNorm2d", None)]
    own = cache.matrix(enc, [(relu, None)])
    assert len(spy) == 2 and not np.array_equal(proxy, own)
    col = dict(zip(enc.columns, proxy[0]))
    assert col["kind=BatchNorm2d"] == 1.0 and col["kind=Conv2d"] == 0.0
    assert np.array_equal(proxy, enc.matrix([(with_kind(relu, "BatchNorm2d"), None)]))
    assert with_kind(relu, "BatchNorm2d")._content_key is relu._content_key  # handed on, not recomputed


def test_records_sharing_an_op_id_never_share_a_row():
    """The key is the record's content, not its op_id: two hand-made records under one id, differing
    only in a hyper-parameter or a metric, get their own rows."""
    metrics = {"flops": 2_000_000, "bytes_read": 4096, "bytes_written": 4096, "params": 0, "is_view": False,
               "output_shapes": [[8, 64]]}  # fmt: skip
    a = OpRecord("op", "Linear", {"in_features": 32, "out_features": 64}, (8, 32), 256, metrics)
    b = OpRecord("op", "Linear", {"in_features": 48, "out_features": 64}, (8, 32), 256, metrics)
    c = OpRecord("op", "Linear", {"in_features": 32, "out_features": 64}, (8, 32), 256, {**metrics, "flops": 9})
    enc = LAYOUTS[1]
    cache = RowCache()
    got = cache.matrix(enc, [(a, None), (b, None), (c, None), (a, None)])
    assert np.array_equal(got, enc.matrix([(a, None), (b, None), (c, None), (a, None)]))
    assert len(cache) == 3
    assert not np.array_equal(got[0], got[1]) and not np.array_equal(got[0], got[2])


def test_another_layout_gets_its_own_rows(records, spy):
    cache = RowCache()
    items = [(records[0], None)]
    a = cache.matrix(Encoding("improved", ("Conv2d",), "A30", 5e-6), items)
    b = cache.matrix(Encoding("improved", ("Conv2d",), "A30_no_tf32", 5e-6), items)  # another device config
    assert len(spy) == 2 and len(cache) == 2
    assert np.array_equal(a, Encoding("improved", ("Conv2d",), "A30", 5e-6).matrix(items))
    assert np.array_equal(b, Encoding("improved", ("Conv2d",), "A30_no_tf32", 5e-6).matrix(items))
    assert not np.array_equal(a, b)  # TF32 on and off: other compute times


@pytest.fixture
def patched_a30(monkeypatch):
    """The A30's table entry at a quarter of its bandwidth; the memoised lookups cleared around the patch."""
    devices.find_device.cache_clear()
    a30 = devices.DEVICES["A30"]
    monkeypatch.setitem(devices.DEVICES, "A30", dataclasses.replace(a30, bandwidth=a30.bandwidth / 4))
    yield
    monkeypatch.undo()
    devices.find_device.cache_clear()


def test_an_encoding_made_under_a_patched_device_table_gets_its_own_rows(records, spy, request):
    """The device is resolved once, when an encoding is made, and is no part of its identity: an encoding made
    under another table entry equals the old one field by field, yet its rows are its own."""
    cache, items = RowCache(), [(records[0], None)]
    old = Encoding("improved", ("Conv2d",), "A30", 5e-6)
    a = cache.matrix(old, items)
    request.getfixturevalue("patched_a30")
    new = Encoding("improved", ("Conv2d",), "A30", 5e-6)
    b = cache.matrix(new, items)
    assert new == old and new.device != old.device and len(spy) == 2
    assert np.array_equal(b, new.matrix(items)) and not np.array_equal(a, b)


def test_the_cache_is_bounded_and_drops_the_least_recently_used(records, spy):
    enc = LAYOUTS[1]
    cache = RowCache(size=3)
    for r in records[:3]:
        cache.matrix(enc, [(r, None)])
    cache.matrix(enc, [(records[0], None)])  # now the most recently used
    cache.matrix(enc, [(records[3], None)])  # drops records[1]
    assert len(cache) == 3 and len(spy) == 4
    cache.matrix(enc, [(records[0], None), (records[2], None), (records[3], None)])
    assert len(spy) == 4
    cache.matrix(enc, [(records[1], None)])
    assert len(spy) == 5


def test_a_record_json_cannot_say_is_encoded_every_time(spy):
    metrics = {"flops": 10, "bytes_read": 8, "bytes_written": 8, "params": 0, "is_view": False,
               "output_shapes": [[2, 2]]}  # fmt: skip
    odd = OpRecord("op", "ReLU", {"inplace": {1, 2}}, (2, 2), 4, metrics)  # a set: no JSON
    cache = RowCache()
    enc = LAYOUTS[1]
    first, second = cache.matrix(enc, [(odd, None)]), cache.matrix(enc, [(odd, None)])
    assert len(spy) == 2 and len(cache) == 0 and np.array_equal(first, second)


def test_warm_predictions_are_the_numbers_of_fresh_encoding_and_encode_once(records, spy, monkeypatch):
    """A bundle's quantity model (the warm path of Predictor.predict_many) through the process cache: a
    one-split tree on log FLOPs gives known answers, the same with and without the cache."""
    monkeypatch.setattr(features, "ROW_CACHE", RowCache())
    enc = LAYOUTS[1]
    col = enc.columns.index("log_flops")
    split = math.log1p(1e9)
    ens = TreeEnsemble(
        feature=np.array([[col, 0, 0]], np.int32),
        threshold=np.array([[split, 0.0, 0.0]]),
        left=np.array([[1, 1, 2]], np.int32),
        right=np.array([[2, 1, 2]], np.int32),
        value=np.array([[0.0, math.log(2e-5), math.log(3e-4)]]),
        depth=1,
        strict_less=True,
        base=0.0,
        average=False,
    )
    qm = QuantityModel("xgb-improved", ens, enc, "log")
    items = [(r, None) for r in records]
    want = [3e-4 if r.metrics["flops"] >= 1e9 else 2e-5 for r in records]
    assert {w for w in want} == {2e-5, 3e-4}  # both leaves are reached
    fresh = qm.predict_matrix(enc.matrix(items))
    n = len(spy)
    warm1, warm2 = qm.predict(items), qm.predict(items)
    assert np.array_equal(warm1, fresh) and np.array_equal(warm2, fresh)
    assert warm1 == pytest.approx(want, rel=1e-12)
    assert len(spy) == n + len(records)  # the first warm call encodes, the second does not
