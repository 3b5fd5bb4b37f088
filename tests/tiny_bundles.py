"""Tiny own bundles for a test project, recorded in its dvc.lock as `dvc repro` records them in a clone
(a bundle nothing vouches for is refused). The numbers are not what such tests check: that a question is
built, traced and answered, or refused, is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def tiny_bundle(root: Path, target: str, ranges: dict | None = None, composition: Any = None) -> None:
    """An own bundle for `target` under root/models/: one small forest over Linear and ReLU; other kinds
    are charged by the costing's fallbacks. `ranges` and `composition`: the Bundle fields, where a test needs them."""
    from sklearn.ensemble import RandomForestRegressor

    from opcost.model.basis.features import Encoding
    from opcost.model.basis.trees import compile_ensemble
    from opcost.model.composition.bundle import Bundle, QuantityModel

    enc = Encoding("baseline", ("Linear", "ReLU"))
    X = np.random.default_rng(0).normal(size=(60, len(enc.columns)))
    ens = compile_ensemble(RandomForestRegressor(n_estimators=3, random_state=0).fit(X, np.abs(X[:, 0]) * 1e-5), X)
    device, mode = target.rsplit("-", 1)
    model = QuantityModel("rf-baseline", ens, enc, "raw")
    b = Bundle(target, device, mode, "forward", {"time": model}, ("Linear", "ReLU"), (), {}, "v", "h")
    b.ranges, b.composition = dict(ranges or {}), composition
    b.save(root / "models" / target)


def record_in_lock(root: Path, missing: tuple[str, ...] = ()) -> None:
    """root/dvc.lock recording every folder under root/models/ with its content md5, and each target of
    `missing` (a folder the checkout lacks) with a made-up one."""
    from opcost.model.records.integrity import dir_md5

    folders = sorted(p for p in (root / "models").iterdir() if p.is_dir()) if (root / "models").is_dir() else []
    md5 = {p.name: dir_md5(p) for p in folders} | {t: "0123456789abcdef0123456789abcdef" for t in missing}
    lines = ["schema: '2.0'", "stages:"]
    for target in sorted(md5):
        lines += [
            f"  train@{target}:",
            f"    cmd: python3 -m opcost.stages.train --target {target}",
            "    outs:",
            f"    - path: models/{target}",
            "      hash: md5",
            f"      md5: {md5[target]}.dir",
        ]
    (root / "dvc.lock").write_text("\n".join(lines) + "\n")
