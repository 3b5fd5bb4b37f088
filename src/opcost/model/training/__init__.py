"""Training an own bundle: fitting the op models and validating them on networks."""
