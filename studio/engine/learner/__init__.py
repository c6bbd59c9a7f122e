"""The data-parallel learner (issue 16, ../shared/LEARNER.md §1-9): the system as data, pointwise assignment programs, the ordered combine, owners on Dask, checkpoints."""
