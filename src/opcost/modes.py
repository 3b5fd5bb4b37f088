"""The two modes a prediction is for, the measured phase each maps to, and the one check of a mode.

A module of its own because nearly every layer (parameters, measurement, models, the command line)
needs the mode vocabulary, and none of them should pull in the parameter parsers or paths for it;
the `unknown mode` error is written here once so every entry point gives the same line.
"""

from __future__ import annotations

from opcost.errors import OpcostError

MODES: tuple[str, ...] = ("inference", "training")


def check_mode(mode: str) -> str:
    """`mode` if it is one of MODES, else the one error every entry point gives."""
    if mode not in MODES:
        raise OpcostError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    return mode


# The measured phase an op model of each mode predicts: a training step runs forward and backward.
OP_PHASE: dict[str, str] = {"inference": "forward", "training": "forward_backward"}
