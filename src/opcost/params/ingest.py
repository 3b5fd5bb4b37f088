"""Section `ingest` of params.yaml: external measurements in data/external/ and the parser of each."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from opcost.errors import OpcostError
from opcost.validation import check_external_path, check_keys, check_name, mapping

# Parsers in src/opcost/data/: thesis.py (thesis-logs), neusight.py (neusight), sweeps.py and crossclock.py
# (the rest).
INGEST_KINDS: tuple[str, ...] = (
    "thesis-logs",
    "zeus-power-limit",
    "dvfs-conv",
    "perseus-stage-profiles",
    "perseus-power-limit",
    "nv-dvfs-kernels",
    "gpu-frequency-dvfs",
    "neusight",
)
# Kinds whose ingest writes op_measurements, networks and operations tables (the rest write sweeps).
OP_SOURCE_KINDS: tuple[str, ...] = ("thesis-logs", "neusight")


@dataclass(frozen=True)
class IngestSource:
    """External measurements in data/external/: where they are and which parser reads them."""

    name: str
    path: str
    kind: str

    @classmethod
    def from_dict(cls, name: str, raw: Any, where: str) -> "IngestSource":
        src = mapping(raw, where, "a mapping with 'path' and 'kind'")
        check_keys(src, ("path", "kind"), where)
        missing = [k for k in ("path", "kind") if k not in src]
        if missing:
            raise OpcostError(f"{where}: missing {' and '.join(missing)}; a source needs a path and a kind")
        kind = src["kind"]
        if kind not in INGEST_KINDS:
            closest = difflib.get_close_matches(str(kind), INGEST_KINDS, n=1, cutoff=0.0)
            raise OpcostError(
                f"{where}: kind {kind!r} is not one of {', '.join(INGEST_KINDS)} (closest: {closest[0]!r})"
            )
        return cls(name, check_external_path(src["path"], f"{where}.path"), kind)


@dataclass(frozen=True)
class IngestParams:
    sources: dict[str, IngestSource] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "IngestParams":
        """`ingest`: `sources: {NAME: {path, kind}}`."""
        ing = mapping(raw, where)
        check_keys(ing, ("sources",), where)
        raw_sources = mapping(ing.get("sources"), f"{where}.sources", "a mapping of source names to path and kind")
        sources = {}
        for name, src in raw_sources.items():
            check_name(name, f"{where}.sources", "source name")
            sources[name] = IngestSource.from_dict(name, src, f"{where}.sources.{name}")
        return cls(sources=sources)
