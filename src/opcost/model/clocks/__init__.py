"""Clocks and power: the cross-clock model and its validation, the power-limit fit, the cross-device power model."""
