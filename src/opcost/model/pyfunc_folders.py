"""The MLflow pyfunc flavour of the models stored as plain files: models/clock (the cross-clock model),
models/xdevice (the cross-device op-time model) and models/xpower (the cross-device power model).

The loader module their registered versions name (model/pyfunc.FOLDER_LOADER_MODULE): `_load_pyfunc`
gets the model's folder and tells the model by the file it holds; each loads as data (JSON and npz, as
`predict` loads it) and answers the table model/pyfunc.FOLDER_MODELS describes. A module of its own so
that registering a bundle (the train stages) does not make their outputs depend on these models' code. Its path
stays opcost.model.pyfunc_folders: registered versions name it in their MLmodel file (model/pyfunc.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opcost.devices import find_device, resolve_device_config
from opcost.model.pyfunc import FOLDER_MODELS, _row


def _load_pyfunc(data_path: str) -> Any:
    folder = Path(data_path)
    loaders = {"clock_model.json": ClockPyfunc, "xdevice.json": XdevicePyfunc, "xpower_model.json": XpowerPyfunc}
    assert set(loaders) == set(FOLDER_MODELS), "a folder model without a loader"
    for file, cls in loaders.items():
        if (folder / file).is_file():
            return cls(folder)
    raise ValueError(f"{folder} holds none of {', '.join(loaders)}")


class ClockPyfunc:
    """The cross-clock model (model/clocks/clock.py): per-op time and power at a core clock from those at the
    device's boost clock and the op's compute-bound share of its roofline time."""

    def __init__(self, folder: Path) -> None:
        from opcost.model.clocks.clock import ClockModel

        self.model = ClockModel.load(folder)

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import numpy as np
        import pandas as pd

        from opcost.model.prediction.clocktransfer import transfer_device

        model_input = model_input.reset_index(drop=True)
        t = np.full(len(model_input), np.nan)
        p = np.full(len(model_input), np.nan)
        for (dev, clock), g in model_input.groupby(["device", "clock_mhz"], sort=False):
            idx = g.index.to_numpy()
            t[idx], p[idx] = self.model.at_clock(
                transfer_device(find_device(str(dev)), str(dev)).device, float(clock), g["t_ref_s"].to_numpy(float),
                g["p_ref_w"].to_numpy(float), g["compute_share"].to_numpy(float),
            )  # fmt: skip
        return pd.DataFrame({"t_s": t, "p_w": p})


class XdevicePyfunc:
    """The cross-device op-time model (model/crossdevice/xdevice.py): each op's forward time per call on any table
    GPU, transferred (its kernels summed where it is costed from its parts), before the network's
    composition and any few-shot correction."""

    def __init__(self, folder: Path) -> None:
        from opcost.model.crossdevice.xdevice import XdeviceModel

        self.model = XdeviceModel.load(folder)

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import numpy as np
        import pandas as pd

        from opcost.model.basis.features import record_of
        from opcost.model.crossdevice.xdevice_net import op_rows

        out = np.zeros(len(model_input))
        for i, (_, r) in enumerate(model_input.iterrows()):
            expanded = op_rows(record_of(_row(r)))
            rows = pd.DataFrame([row for row, _ in expanded])
            rows["device_config"] = resolve_device_config(str(r["device_config"]))
            rows["wall_clock"] = 0.0
            out[i] = float((self.model.op.predict(rows) * np.array([c for _, c in expanded])).sum())
        return pd.DataFrame({"t_s": out})


class XpowerPyfunc:
    """The cross-device power model (model/clocks/xpower.py): a network's average power on a table GPU from its
    busy share (roofline time over time), with the model's relative 90 % error."""

    def __init__(self, folder: Path) -> None:
        from opcost.model.clocks.xpower import PowerModel

        self.model = PowerModel.load(folder)

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import numpy as np
        import pandas as pd

        p, rel = [], []
        for _, r in model_input.iterrows():
            w, e = self.model.predict(str(r["device_config"]), np.array([float(r["busy_share"])]), None, str(r["mode"]))
            p.append(float(w[0]))
            rel.append(float(e))
        return pd.DataFrame({"p_w": p, "rel_err90": rel})
