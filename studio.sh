#!/usr/bin/env bash
# Set up, then run the main job: the Studio where there is a display, otherwise the story
# workflow headless (spike removal on a million-sample signal through the device, plot to PNG).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec .venv/bin/scellis-studio "$@"
else
  # the story workflow: spiky signal -> clip -> the user's median -> low-pass; every op proven here
  # first (--prove), then the plot, the cleaned signal and the provenance record
  exec .venv/bin/scellis workflow run --prove --plot "${1:-scellis-demo.png}"
fi
