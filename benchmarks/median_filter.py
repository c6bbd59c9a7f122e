"""Kept for the old command line: the median rows of the benchmark suite (benchmarks/bench_median.py).
Run: .venv/bin/python -m benchmarks --only median"""
import sys

from benchmarks.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["--only", "median", *sys.argv[1:]]))
