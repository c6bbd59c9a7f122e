#!/usr/bin/env bash
# Set up (with the test extras), then run the whole test suite on a real wgpu adapter.
# The whole suite is two lanes, every test once (docs/testing.md):
#   1. the fast lane (-m "not slow") under coverage: its data is the fast-lane coverage check;
#   2. the slow lane (-m slow), whose coverage test reads the first lane's verdict.
# Both run on the two cores with pytest-xdist, the longest files first (tests/suite_order.py);
# each prints its figures against the budget in pyproject.toml, and the second the whole suite's.
# With arguments: one pytest run of those.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh test
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" QT_QPA_PLATFORM=offscreen
workers="${SCELLIS_TEST_WORKERS:-2}"
py=.venv/bin/python
if [ "$#" -gt 0 ]; then
  set +e
  $py -m pytest -q -p no:cacheprovider --durations=25 "$@"
  rc=$?
  set -e
  if [ "$rc" -eq 5 ]; then echo "test.sh: pytest collected no tests: failing" >&2; exit 1; fi
  exit "$rc"
fi
record="$(mktemp -d "${TMPDIR:-/tmp}/scellis-suite-XXXXXX")"
trap 'rm -rf "$record"' EXIT
export SCELLIS_SUITE_RECORD="$record/lanes.json"
set +e
echo "test.sh: lane 1 of 2: the fast lane under coverage (the fast-lane coverage check)"
$py scripts/fast_lane_coverage.py --result "$record/fast-lane.json" -- -n "$workers" --dist loadscope --no-loadscope-reorder --durations=10
rc1=$?
echo "test.sh: lane 2 of 2: the slow lane"
SCELLIS_FAST_LANE_RESULT="$record/fast-lane.json" \
  $py -m pytest -q -p no:cacheprovider -m slow -n "$workers" --dist loadscope --no-loadscope-reorder --durations=25
rc2=$?
set -e
if [ "$rc2" -eq 5 ]; then echo "test.sh: the slow lane collected no tests: failing" >&2; exit 1; fi
if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ]; then
  echo "test.sh: failed (fast lane and its coverage check: exit $rc1; slow lane: exit $rc2)" >&2
  exit 1
fi
