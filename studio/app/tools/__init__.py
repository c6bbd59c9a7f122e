"""The tools beside the notebook: the catalog panel, the learner and sharding panels, the workflow notebook
and its data-parallel training."""
