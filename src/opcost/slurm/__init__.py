"""Profiling campaigns on a SLURM cluster: job arrays of shards, a merge job, their status.

`scheduler` is the only module that runs SLURM's commands (sbatch, squeue, sacct); `submit` decides
what to submit and reports per-shard state. Measuring itself is `opcost profile --shard/--merge`.
"""
