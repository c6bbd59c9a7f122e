#!/usr/bin/env bash
# Sets up a local virtualenv with the package, and the system parts it needs:
# Mesa's Vulkan software driver (lavapipe) when wgpu finds no adapter, and the
# shared libraries Qt needs when they are missing. Idempotent; quiet when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-python3}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

apt_install() {
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $* (apt)"
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
  else
    echo "setup: please install $* with your system's package manager" >&2
  fi
}

if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then apt_install python3-venv; fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=".venv/.installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}" 2>&1 \
    | { grep -v "^WARNING: Location 'file://" || true; }
  touch "$stamp"
fi

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
if ! .venv/bin/python - <<'PY' >/dev/null 2>&1
import sys, wgpu
try:
    a = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
except Exception:
    a = None
sys.exit(0 if a is not None else 1)
PY
then
  apt_install mesa-vulkan-drivers libvulkan1
fi

if ! QT_QPA_PLATFORM=offscreen .venv/bin/python -c 'from PySide6.QtWidgets import QApplication; QApplication([])' >/dev/null 2>&1; then
  apt_install libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0
fi
