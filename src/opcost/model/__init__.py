"""Models: features, training with MLflow tracking and registry, prediction."""
