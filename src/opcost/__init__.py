"""opcost: what a neural network costs in time and energy on a given GPU, without running it there.

Nothing the project starts sends telemetry: MLflow's usage telemetry is switched off here, before
any entry point (CLI, API, DVC stage, test) can import MLflow. A user who wants it can export
`MLFLOW_DISABLE_TELEMETRY=false` explicitly; `DO_NOT_TRACK` is the cross-tool convention. The
Hugging Face hub's telemetry is off too, and `hf:` models are built offline (ops/netspec.py).
"""

import os as _os

for _var in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK"):
    _os.environ.setdefault(_var, "true")
_os.environ.setdefault("DVC_NO_ANALYTICS", "1")
_os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # Hugging Face models are built from configs only

__version__ = "0.1.0"
