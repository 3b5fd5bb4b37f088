"""Data in: ingesting external measurements, and evaluating every source into one table per kind."""
