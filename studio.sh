#!/usr/bin/env bash
# Set up, then run the main job: the Studio where there is a display, otherwise the
# headless demo (spike removal on a million-sample signal through the device, plot to PNG).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec .venv/bin/scellis-studio "$@"
else
  exec .venv/bin/scellis demo --out "${1:-scellis-demo.png}"
fi
