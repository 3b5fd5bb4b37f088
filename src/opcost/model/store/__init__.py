"""Where models are kept: registering versions in MLflow, finding champions, loading bundles from the store."""
