"""bf16 under sharding (docs/bf16.md; docs/requirements.md L10-L13): classify each node as exact under sharding or rounded per replica, and measure it."""
