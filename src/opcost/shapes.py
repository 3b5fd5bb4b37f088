"""How a model input is spelled: a shape `32,3,224,224` (or `32x3x224x224` in ids and file names) and a
floating-point dtype. Apart from the parameters because the command line, the extractor and the
predictor parse shapes too.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from opcost.errors import OpcostError

DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
INPUT_SHAPE_HELP = "B,C,H,W: four positive integers, e.g. 32,3,224,224"


def parse_input_shape(value: str | Sequence[Any], what: str = "input shape") -> tuple[int, ...]:
    """Parse `32,3,224,224` (or a list of ints) into a 4-tuple of positive ints, or fail clearly."""
    raw = value
    if isinstance(value, str):
        parts = [p.strip() for p in value.replace("x", ",").split(",")]
        if any(p == "" for p in parts):
            raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
        try:
            items: list[Any] = [int(p) for p in parts]
        except ValueError:
            raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}") from None
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
    if len(items) != 4 or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in items):
        raise OpcostError(f"malformed {what} {raw!r}: expected {INPUT_SHAPE_HELP}")
    return tuple(items)


def shape_text(shape: Iterable[int]) -> str:
    """`(32, 3, 224, 224)` -> `32x3x224x224`, the spelling used in set ids and file names."""
    return "x".join(str(int(s)) for s in shape)
