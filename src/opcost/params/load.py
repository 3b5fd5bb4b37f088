"""params.yaml read strictly into `Params`, one frozen dataclass per section (the other modules here).

Strict because a typo there silently changes what a stage does: an unknown key at any level is an
error naming the key, where it is and the closest valid key; a value of the wrong type (a string or
bool where a number goes), NaN, infinity, a non-positive duration or count, a duplicated key, is a
one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from opcost.errors import OpcostError
from opcost.params.clock import ClockParams
from opcost.params.extract import ExtractParams
from opcost.params.ingest import IngestParams
from opcost.params.profile import ProfileParams
from opcost.params.train import TrainParams
from opcost.params.xdevice import XdeviceParams
from opcost.paths import Paths
from opcost.validation import check_keys, mapping


@dataclass(frozen=True)
class Params:
    extract: ExtractParams
    profile: ProfileParams = field(default_factory=ProfileParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    train: TrainParams = field(default_factory=TrainParams)
    clock: ClockParams = field(default_factory=ClockParams)
    xdevice: XdeviceParams = field(default_factory=XdeviceParams)


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last)."""


def _no_duplicate_keys(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise OpcostError(f"key {key!r} given twice (line {key_node.start_mark.line + 1})")
        seen.add(key)
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=deep)  # PyYAML: untyped
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)

TOP_KEYS = ("extract", "profile", "ingest", "train", "clock", "xdevice")


def read_yaml(path: Path) -> object:
    """A YAML file parsed strictly (a key given twice is refused); a broken file is one line naming it."""
    try:
        return yaml.load(path.read_text(), Loader=_StrictLoader)
    except OpcostError as exc:
        raise OpcostError(f"{path.name}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OpcostError(f"{path.name} is not valid YAML: {first}") from None


def load_params(path: Path) -> Params:
    """Read and validate params.yaml (and the extract sets file beside it); every problem names the
    entry and what would be valid."""
    if not path.is_file():
        raise OpcostError(f"parameter file {path} not found: run from the repository root or set OPCOST_ROOT")
    raw = read_yaml(path)
    f = path.name
    raw = mapping(raw, f, "a mapping of sections")
    check_keys(raw, TOP_KEYS, f"{f} (top level)")
    found = Paths(path.parent).extract_sets
    sets_file = found if found.is_file() else None  # None: a small test root, sets in params.yaml's extract.sets
    return Params(
        extract=ExtractParams.load(
            None if sets_file is None else read_yaml(sets_file),
            None if sets_file is None else sets_file.name,
            raw.get("extract"),
            f,
            str(path.parent.resolve()),  # a set's relative model file: beside the set file, not in the cwd
        ),
        profile=ProfileParams.from_dict(raw.get("profile"), f"{f}: profile"),
        ingest=IngestParams.from_dict(raw.get("ingest"), f"{f}: ingest"),
        train=TrainParams.from_dict(raw.get("train"), f"{f}: train"),
        clock=ClockParams.from_dict(raw.get("clock"), f"{f}: clock"),
        xdevice=XdeviceParams.from_dict(raw.get("xdevice"), f"{f}: xdevice"),
    )
