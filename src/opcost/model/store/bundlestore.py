"""Loading bundles: which targets a project has, and each target's bundle, loaded once.

Why a module of its own: where a bundle comes from (models/<target>/ checked against dvc.lock, or
the MLflow registry's champion checked against its `bundle_md5` tag) and how a missing, modified or
unvouched one is said in one line is one job, apart from what a prediction does with it. A bundle
nothing vouches for (no `dvc.lock` record, no tag) is refused unless `trust_unrecorded`; then it is
served with `Bundle.unvouched` saying why, and every answer from it carries that as a warning.
Targets are named by the device table's keys (`NVIDIA H100 80GB HBM3`, `h100` -> `H100`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from opcost.errors import OpcostError
from opcost.model.composition.bundle import BUNDLE_FILE, Bundle
from opcost.modes import check_mode
from opcost.paths import Paths


@dataclass
class BundleStore:
    """The project's bundles: from models/ (the train stages' DVC outputs) or, with `registry`, from
    the MLflow registry's champions (the registered model carries the bundle: no local models/)."""

    paths: Paths
    registry: bool = False
    trust_unrecorded: bool = False  # serve a bundle nothing vouches for (the answers say so)
    loaded: dict[str, Bundle] = field(default_factory=dict)  # target -> bundle, loaded once
    _listing: "_Listing | None" = field(default=None, init=False, repr=False, compare=False)

    def targets(self) -> list[str]:
        """Device config and mode pairs with a trained model, e.g. ['A30-inference', ...].

        models/ is listed once and listed again only when it may have changed (`_Listing`): every
        prediction asks, and a glob of models/ was a sixth of a warm sequential one."""
        root = self.paths.root / "models"
        if self._listing is None or self._listing.root != root or not self._listing.fresh():
            self._listing = _Listing.of(root)
        return list(self._listing.targets)

    def bundle(self, device: str, mode: str) -> Bundle:
        """The bundle of `device` in `mode`; one line naming what is trained where there is none."""
        check_mode(mode)
        from opcost.devices import table_name

        device = table_name(device)  # `NVIDIA H100 80GB HBM3`, `h100` -> `H100`: targets are named by table keys
        target = f"{device}-{mode}"
        if target in self.loaded:
            return self.loaded[target]
        if self.registry:  # the registered model carries the bundle: no local models/ needed
            from opcost.model.store.registry import champion_bundle

            self.loaded[target] = champion_bundle(self.paths, target, self.trust_unrecorded)
            return self.loaded[target]
        available = self.targets()
        if not available:
            from opcost.model.store.registry import no_models_error

            raise no_models_error(self.paths)
        if (self.paths.model_dir(target)).is_dir() and target not in available:
            Bundle.load(self.paths.model_dir(target))  # a folder without bundle.json: names the missing file
        if target not in available:
            from opcost.devices import lookup_device, unknown_device

            trained = {t.rpartition("-")[0] for t in available}
            if lookup_device(device) is None and device not in trained:  # a typo, not a GPU without a model
                raise unknown_device(device)
            devices = sorted({t.rpartition("-")[0] for t in available if t.endswith(f"-{mode}")})
            raise OpcostError(
                f"no model for device {device!r} in mode {mode}; trained: {', '.join(devices) or 'none in this mode'} "
                f"(all: {', '.join(available)})"
            )
        from opcost.model.records.integrity import locked_md5, unrecorded_error, unrecorded_why

        folder = self.paths.model_dir(target)
        expect = locked_md5(self.paths.root, folder)  # by the path in the project, not where a link leads
        if expect is None and not self.trust_unrecorded:
            raise unrecorded_error(self.paths.root, folder)
        try:
            bundle = Bundle.load(folder, expect_md5=expect)
        except OpcostError as exc:
            if expect is None or "was modified" not in str(exc):
                raise
            # the folder differs from what dvc.lock records: tampered, or retrained outside DVC
            raise OpcostError(
                f"{exc}: if you retrained it yourself (`opcost train`), record it with `dvc commit train@{target}`; "
                f"otherwise restore the pipeline's copy with `dvc checkout {folder.relative_to(self.paths.root)}`"
            ) from None
        if expect is None:
            bundle.unvouched = unrecorded_why(self.paths.root, folder)
        self.loaded[target] = bundle
        return self.loaded[target]


# Modification times are stamped at the file system's clock tick: a folder changed within this many
# seconds of its listing may change again with the same stamp, so such a listing is never reused.
RACY_S = 2.0


@dataclass(frozen=True)
class _Listing:
    """The targets under models/ and the stamps that say whether they may have changed: models/ itself
    (a target folder added, removed or replaced) and each of its folders (a bundle.json written or
    removed in one). Stat calls only, no glob; a listing taken within RACY_S of a stamp is not reused."""

    root: Path
    targets: tuple[str, ...]
    stamps: tuple[tuple[str, int], ...]  # (path, st_mtime_ns); the root first
    trusted: bool

    @staticmethod
    def of(root: Path) -> "_Listing":
        now = time.time_ns()
        try:
            top = os.stat(root).st_mtime_ns
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return _Listing(root, (), (), False)
        stamps, targets = [(str(root), top)], []
        for e in entries:
            try:
                if not e.is_dir():  # follows links: a target folder may be a link (DVC's link cache types)
                    continue
                stamps.append((e.path, os.stat(e.path).st_mtime_ns))
            except OSError:
                continue
            if os.path.exists(os.path.join(e.path, BUNDLE_FILE)):
                targets.append(e.name)
        trusted = all(now - m > RACY_S * 1e9 for _, m in stamps)
        return _Listing(root, tuple(targets), tuple(stamps), trusted)

    def fresh(self) -> bool:
        """Whether no stamp moved since the listing (always False for an untrusted listing)."""
        if not self.trusted:
            return False
        try:
            return all(os.stat(p).st_mtime_ns == m for p, m in self.stamps)
        except OSError:
            return False
