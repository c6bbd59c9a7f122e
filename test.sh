#!/usr/bin/env bash
# Set up (with the test extras), then run the whole test suite on a real wgpu adapter.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh test
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" QT_QPA_PLATFORM=offscreen
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "test.sh: pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
