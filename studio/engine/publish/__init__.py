"""Publishing (issue 15): visibility, SPDX licenses, the public bar, cards, forks with lineage, and the exchange ring (a folder or a git repository)."""
