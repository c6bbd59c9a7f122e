"""The data-parallel learner (docs/learner.md; docs/requirements.md L1-L9): the system as data, pointwise assignment programs, the ordered combine, owners on Dask, checkpoints."""
