"""The op-level basis every model stands on: roofline physics, GEMM/backward features, encodings, trees, solvers."""
