"""Hashes and cache keys from the code that made them: an edit to any module in the import closure
changes them (opcost.closure), on a temporary copy of src/ so the working tree is never touched."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from opcost import closure as closure_module
from opcost.closure import closure, code_hash
from opcost.model.composition import netcache, network
from opcost.model.training import fit
from opcost.params.train import TrainParams

SRC = Path(closure_module.__file__).resolve().parent.parent


@pytest.fixture
def src_copy(tmp_path, monkeypatch) -> Path:
    """A copy of src/ that the closure functions read instead of the real one."""
    dst = tmp_path / "src"
    shutil.copytree(SRC, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    monkeypatch.setattr(closure_module, "SRC", dst)
    return dst


def rel(files: set[Path], src: Path = SRC) -> set[str]:
    return {f.relative_to(src).as_posix() for f in files}


def test_closures_hold_the_modules_their_results_depend_on():
    train = rel(closure(fit.BUNDLE_CODE_ENTRY))
    assert {"opcost/model/training/netval.py", "opcost/model/training/fit.py", "opcost/model/composition/compose.py",
            "opcost/model/basis/physics.py", "opcost/devices.py", "opcost/__init__.py",
            "opcost/model/__init__.py"} <= train  # fmt: skip
    extraction = rel(closure(*network.EXTRACTION_ENTRIES))
    assert {"opcost/model/basis/features.py", "opcost/model/basis/physics.py", "opcost/ops/extract.py",
            "opcost/ops/catalog.py", "opcost/ops/memory.py"} <= extraction  # fmt: skip


def test_an_edit_to_any_module_of_the_closure_changes_the_bundle_hash_and_the_cache_key(src_copy):
    tp = TrainParams(targets=("A30-inference",))
    bundle0 = fit.bundle_hash("v1", tp, "A30-inference")
    cache0 = netcache.extraction_code_hash()
    assert bundle0 == fit.bundle_hash("v1", tp, "A30-inference")  # stable
    train = sorted(closure(fit.BUNDLE_CODE_ENTRY, src=src_copy))
    extraction = set(closure(*network.EXTRACTION_ENTRIES, src=src_copy))
    for f in train + sorted(extraction - set(train)):
        before = f.read_bytes()
        f.write_bytes(before + b"\n# an edit\n")
        name = f.relative_to(src_copy).as_posix()
        assert (fit.bundle_hash("v1", tp, "A30-inference") != bundle0) == (f in train), name
        assert (netcache.extraction_code_hash() != cache0) == (f in extraction), name
        f.write_bytes(before)
    assert fit.bundle_hash("v1", tp, "A30-inference") == bundle0 and netcache.extraction_code_hash() == cache0


def test_a_module_outside_the_closure_leaves_them_alone(src_copy):
    """A new module nothing imports (and the CLI, which training never loads) changes neither."""
    tp = TrainParams()
    bundle0, cache0 = fit.bundle_hash("v1", tp, "A30-inference"), netcache.extraction_code_hash()
    (src_copy / "opcost" / "model" / "unused_new.py").write_text("X = 1\n")
    assert fit.bundle_hash("v1", tp, "A30-inference") == bundle0 and netcache.extraction_code_hash() == cache0
    assert "opcost/cli.py" not in rel(closure(fit.BUNDLE_CODE_ENTRY), src_copy)


def test_a_new_import_brings_a_module_into_the_closure(src_copy):
    new = src_copy / "opcost" / "model" / "helper_new.py"
    new.write_text("Y = 2\n")
    h0 = code_hash([fit.BUNDLE_CODE_ENTRY])
    netval = src_copy / "opcost" / "model" / "training" / "netval.py"
    netval.write_text(netval.read_text() + "\n\ndef _later():\n    from opcost.model import helper_new  # noqa\n")
    assert new in closure(fit.BUNDLE_CODE_ENTRY, src=src_copy)
    h1 = code_hash([fit.BUNDLE_CODE_ENTRY])
    new.write_text("Y = 3\n")
    assert len({h0, h1, code_hash([fit.BUNDLE_CODE_ENTRY])}) == 3


def test_bundle_hash_keys_on_its_own_target_and_shaping_params_not_the_target_list():
    tp = TrainParams(targets=("A30-inference",))
    h = fit.bundle_hash("v1", tp, "A30-inference")
    more = dataclasses.replace(tp, targets=("A30-inference", "H100-training"))
    assert fit.bundle_hash("v1", more, "A30-inference") == h  # adding a target changes no other bundle
    assert fit.bundle_hash("v1", dataclasses.replace(tp, seed=1), "A30-inference") != h
    assert fit.bundle_hash("v1", dataclasses.replace(tp, folds=5), "A30-inference") != h
    assert fit.bundle_hash("v2", tp, "A30-inference") != h
    assert fit.bundle_hash("v1", tp, "A30-training") != h


def test_kept_parses_give_the_same_hash_without_parsing_again_and_follow_edits(src_copy, tmp_path, monkeypatch):
    """A cold `opcost predict` keys its network cache on the extraction closure; the parses kept on disk
    (closure-imports.json) make that hash without parsing the files again, and a file's new text is a new
    key: an edit that adds an import is followed, never answered from a stale parse."""
    facts = tmp_path / "cache" / "closure-imports.json"
    entries = network.EXTRACTION_ENTRIES
    want = code_hash(entries, src=src_copy)

    def cold(monkeypatch) -> list[str]:
        """A new process: nothing in memory; every ast.parse counted."""
        monkeypatch.setattr(closure_module, "_FACTS", {})
        closure_module._imported_modules.cache_clear()
        parsed: list[str] = []
        real = closure_module.ast.parse

        def parse(text: str, *a, **k):
            parsed.append(text)
            return real(text, *a, **k)

        monkeypatch.setattr(closure_module.ast, "parse", parse)
        return parsed

    parsed = cold(monkeypatch)
    assert code_hash(entries, src=src_copy, facts_file=facts) == want
    n_files = len(closure(*entries, src=src_copy))
    assert len(parsed) == n_files and facts.is_file()
    parsed = cold(monkeypatch)
    assert code_hash(entries, src=src_copy, facts_file=facts) == want and parsed == []
    # an edit that imports a module outside the closure: parsed afresh, the module joins the closure
    feats = src_copy / "opcost" / "model" / "basis" / "features.py"
    assert "opcost/cputhreads.py" not in rel(closure(*entries, src=src_copy), src_copy)
    feats.write_text(feats.read_text() + "\n\ndef _late():\n    import opcost.cputhreads  # noqa\n")
    parsed = cold(monkeypatch)
    edited = code_hash(entries, src=src_copy, facts_file=facts)
    assert edited != want and len(parsed) == 2  # features.py's new text and cputhreads.py
    assert "opcost/cputhreads.py" in rel(closure(*entries, src=src_copy), src_copy)
    assert edited == code_hash(entries, src=src_copy)  # the same as without kept parses
    # a file that is not the parses' JSON is ignored and rewritten
    facts.write_text("{not json")
    parsed = cold(monkeypatch)
    assert code_hash(entries, src=src_copy, facts_file=facts) == edited and len(parsed) == n_files + 1
    parsed = cold(monkeypatch)
    assert code_hash(entries, src=src_copy, facts_file=facts) == edited and parsed == []
