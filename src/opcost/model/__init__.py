"""Models, in rooms (bottom up): basis, records, crossdevice, clocks, composition, training, store, prediction;
pyfunc.py and pyfunc_folders.py stay here, their paths named in registered MLflow models (docs/architecture.md)."""
