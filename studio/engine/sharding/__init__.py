"""bf16 under sharding (issue 17, ../shared/LEARNER.md §10-13): classify each node as exact under sharding or rounded per replica, and measure it."""
