"""The network cache: extractions kept in memory for a process and on disk across processes.

Why a module of its own: a question about a network seen before must not import torch (a cold
process answers from .opcost/cache/networks/ in well under a second), and a stale or broken entry
must never reach an answer. The key is the NetSpec's key and the mode, the torch and torchvision
versions and the hash of the extraction code's import closure (model/composition/network.EXTRACTION_ENTRIES,
opcost.closure): an edit to any module extraction runs makes new entries. An entry that cannot be
read (a write cut short, a disk error, a file edited by hand) is discarded and rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path

from opcost.io import write_json
from opcost.model.composition.network import EXTRACTION_ENTRIES, Network, extract_network
from opcost.ops.netspec import NetSpec


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def extraction_code_hash(facts_file: Path | None = None) -> str:
    """The hash of the extraction code's import closure: part of every cache key. `facts_file`: where
    the closure's parses are kept (opcost.closure), so a cold process does not parse its files again."""
    from opcost.closure import code_hash

    return code_hash(EXTRACTION_ENTRIES, facts_file=facts_file)[:12]


def read_cached(f: Path) -> Network | None:
    """A cached extraction, or None (and the file discarded, to be rebuilt) where it cannot be read:
    a write cut short, a disk error, a file edited by hand. A cache never fails a prediction."""
    try:
        d = json.loads(f.read_text())
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        net = Network.from_json(d)
        if not set(net.calls) <= set(net.records):
            raise KeyError("calls of ops without a record")
        return net
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        f.unlink(missing_ok=True)
        return None


@dataclass
class NetworkCache:
    """Extractions by (NetSpec key, mode): in memory, and under `folder` when one is given (None: no
    file read or written, as the validate stage needs: no undeclared input or output)."""

    folder: Path | None
    _networks: dict[tuple[str, str], Network] = field(default_factory=dict)

    def file(self, key: tuple[str, str]) -> Path:
        """The disk entry of a key (the folder must be set)."""
        if self.folder is None:
            raise ValueError("a network cache without a folder has no files")
        code = extraction_code_hash(self.folder.parent / "closure-imports.json")
        ident = json.dumps([*key, _version("torch"), _version("torchvision"), code])
        name = hashlib.sha256(ident.encode()).hexdigest()[:20]
        return self.folder / f"{name}.json"

    def get(self, spec: NetSpec, mode: str) -> Network:
        """The extracted network: from memory, else from disk, else extracted (and written to disk)."""
        key = (json.dumps(spec.key(), sort_keys=True), mode)
        if key in self._networks:
            return self._networks[key]
        f = self.file(key) if self.folder is not None else None
        net = read_cached(f) if f is not None and f.is_file() else None
        if net is None:
            net = extract_network(spec, mode)
            if f is not None:
                write_json(net.to_json([spec.key(), mode]), f, digits=None)
        self._networks[key] = net
        return net


def network_cache(root: Path, disk: bool = True) -> NetworkCache:
    """The project's cache: .opcost/cache/networks/ under `root`, or memory only."""
    return NetworkCache(root / ".opcost" / "cache" / "networks" if disk else None)


__all__ = ["NetworkCache", "extraction_code_hash", "network_cache", "read_cached"]
