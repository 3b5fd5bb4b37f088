"""A network's cost from its ops: op costing, the composition, intervals, extrapolation, the bundle, caches."""
