"""What vouches for a model: MLflow names and store checks, the run log, folder hashes against dvc.lock."""
