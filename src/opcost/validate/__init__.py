"""Validation: whole networks against their operations and predictions, sweeps, and the report."""
