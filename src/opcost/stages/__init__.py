"""One thin module per DVC stage: read tables, call library code, write tables.

Each module has `run(paths, params, ...)` (what the `opcost <verb>` CLI calls), `summary(result)`
(the line both entry points print) and `main()` for `python3 -m opcost.stages.<name>`, which is
what `dvc.yaml` runs. Running the stage module rather than the CLI keeps each stage's import closure
(and so its `deps:` in dvc.yaml) to the code that can change its outputs; `tests/test_stage_deps.py`
derives that closure from the imports and fails when dvc.yaml misses a module.

Importing this package holds numpy at its baseline kernels for the stage process (opcost/numerics.py):
a stage's outputs are then the same on any x86 CPU, whatever SIMD width it has.
"""

from opcost.numerics import pin_numpy_kernels

pin_numpy_kernels()
