"""Scellis Studio's benchmarks: every figure beside its peer in the same run, as ratios.

`python -m benchmarks` runs every row and prints one table; `--quick` (CI) runs the smaller set
and fails when a ratio is several times past its limit. Every run writes results/latest.json.
Each row is a dict: figure, peer, time_s, peer_s, ratio (time_s / peer_s: below 1 is faster
than the peer), adapter, and where a row is checked in --quick its limit (docs/performance.md)."""
