"""Measuring: timing, energy sources, clock control, and resumable campaigns."""
