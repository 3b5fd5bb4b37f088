"""opcost: what a neural network costs in time and energy on a given GPU, without running it there."""

__version__ = "0.1.0"
