"""Loading bundles: which targets a project has, and each target's bundle, loaded once.

Why a module of its own: where a bundle comes from (models/<target>/ checked against dvc.lock, or
the MLflow registry's champion) and how a missing or modified one is said in one line is one job,
apart from what a prediction does with it. Targets are named by the device table's keys
(`NVIDIA H100 80GB HBM3`, `h100` -> `H100`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opcost.errors import OpcostError
from opcost.model.bundle import BUNDLE_FILE, Bundle
from opcost.modes import check_mode
from opcost.paths import Paths


@dataclass
class BundleStore:
    """The project's bundles: from models/ (the train stages' DVC outputs) or, with `registry`, from
    the MLflow registry's champions (the registered model carries the bundle: no local models/)."""

    paths: Paths
    registry: bool = False
    loaded: dict[str, Bundle] = field(default_factory=dict)  # target -> bundle, loaded once

    def targets(self) -> list[str]:
        """Device config and mode pairs with a trained model, e.g. ['A30-inference', ...]."""
        root = self.paths.root / "models"
        return sorted(p.parent.name for p in root.glob(f"*/{BUNDLE_FILE}")) if root.is_dir() else []

    def bundle(self, device: str, mode: str) -> Bundle:
        """The bundle of `device` in `mode`; one line naming what is trained where there is none."""
        check_mode(mode)
        from opcost.devices import table_name

        device = table_name(device)  # `NVIDIA H100 80GB HBM3`, `h100` -> `H100`: targets are named by table keys
        target = f"{device}-{mode}"
        if target in self.loaded:
            return self.loaded[target]
        if self.registry:  # the registered model carries the bundle: no local models/ needed
            from opcost.model.registry import champion_bundle

            self.loaded[target] = champion_bundle(self.paths, target)
            return self.loaded[target]
        available = self.targets()
        if not available:
            from opcost.model.registry import no_models_error

            raise no_models_error(self.paths)
        if (self.paths.model_dir(target)).is_dir() and target not in available:
            Bundle.load(self.paths.model_dir(target))  # a folder without bundle.json: names the missing file
        if target not in available:
            devices = sorted({t.rpartition("-")[0] for t in available if t.endswith(f"-{mode}")})
            raise OpcostError(
                f"no model for device {device!r} in mode {mode}; trained: {', '.join(devices) or 'none in this mode'} "
                f"(all: {', '.join(available)})"
            )
        from opcost.model.integrity import locked_md5  # content checked against dvc.lock (issue 24.3)

        folder = self.paths.model_dir(target)
        expect = locked_md5(self.paths.root, folder)
        try:
            self.loaded[target] = Bundle.load(folder, expect_md5=expect)
        except OpcostError as exc:
            if expect is None or "was modified" not in str(exc):
                raise
            # the folder differs from what dvc.lock records: tampered, or retrained outside DVC
            raise OpcostError(
                f"{exc}: if you retrained it yourself (`opcost train`), record it with `dvc commit train@{target}`; "
                f"otherwise restore the pipeline's copy with `dvc checkout {folder.relative_to(self.paths.root)}`"
            ) from None
        return self.loaded[target]
