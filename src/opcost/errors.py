"""User-facing errors.

Every error a user can cause by bad input is an `OpcostError`: the CLI prints its message on one
line and exits non-zero, without a traceback. Messages name the bad input and what would be valid.
"""


class OpcostError(Exception):
    """An error caused by input the user can fix; its message is shown as is."""


class SchemaError(OpcostError):
    """A table does not match its declared schema (missing column, wrong dtype, out-of-range value)."""
