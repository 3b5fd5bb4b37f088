"""`python -m opcost` runs the command-line interface (used where the package is not installed)."""

from opcost.cli import main

main()
