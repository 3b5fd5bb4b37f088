"""params.yaml, one module per section, each a frozen dataclass parsed by a `from_dict` classmethod
with the checks of opcost/validation.py; `load.load_params` reads the file and assembles `Params`.

This file imports nothing on purpose: a module that needs one section (the clock model needs
`clock.ClockParams`) loads that section alone, so a change to another section's parser reruns no
stage that cannot be affected by it (stage deps are import closures, tests/test_stage_deps.py).
"""
