#!/usr/bin/env bash
# Sets up a local virtualenv with the package, and the system parts it needs:
#  - Mesa's Vulkan driver (lavapipe) unless wgpu finds a Vulkan, Metal or D3D12 adapter
#    (wgpu's OpenGL backend computes wrong results; it never counts as a GPU here);
#  - the shared libraries Qt needs offscreen, and for its xcb platform where a display exists.
# Idempotent; quiet when all is there. SETUP_DRY_RUN=1 says what it would install and installs
# nothing (the tests use it to check these decisions on any machine).
# A stamp of its inputs (this script, pyproject.toml, the extras, the display and backend
# variables, the Python, the state of the system packages it installs) is kept in
# .venv/.setup-<extras> after a run that found everything; when they are unchanged, a later run
# returns at once (./studio.sh's second launch). SETUP_FORCE=1 runs it anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-python3}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
DRY="${SETUP_DRY_RUN:-}"
VULKAN_PKGS="mesa-vulkan-drivers libvulkan1"
QT_PKGS="libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0"
XCB_PKGS="libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libxcb-shape0 libxcb-randr0 \
libxcb-render-util0 libxcb-image0 libxcb-xkb1 libx11-xcb1"
TEST_PKGS="xvfb libegl-mesa0 libgl1-mesa-dri chromium"   # chromium: the proof report rendered as a browser shows it

stamp_inputs() {  # what setup's decisions depend on, as one checksum
  {
    echo "extras=$extras display=${DISPLAY:-}/${WAYLAND_DISPLAY:-} backend=${WGPU_BACKEND_TYPE:-} py=$PY"
    "$PY" -c 'import sys; print(sys.version)' 2>/dev/null || true
    cat scripts/setup.sh pyproject.toml
    if command -v dpkg-query >/dev/null 2>&1; then
      dpkg-query -W -f='${Package} ${Status}\n' $VULKAN_PKGS $QT_PKGS $XCB_PKGS $TEST_PKGS 2>/dev/null || true
    fi
  } | cksum
}
SETUP_STAMP=".venv/.setup-${extras:-main}"
if [ -z "$DRY" ] && [ -z "${SETUP_FORCE:-}" ] && [ -x .venv/bin/python ] && [ -f "$SETUP_STAMP" ] \
   && [ "$(cat "$SETUP_STAMP")" = "$(stamp_inputs)" ]; then
  exit 0                                  # nothing it installs or checks has changed since it last found all
fi
all_found=1

missing_debs() {  # the named Debian packages that are not installed
  local p out=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out="$out $p"
  done
  echo "$out"
}

apt_install() {
  local why="$1"; shift
  all_found=0                             # the stamp is written only by a run that needed nothing
  if [ -n "$DRY" ]; then echo "setup: would install $* ($why)"; return; fi
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $* ($why)"
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
  else
    echo "setup: please install $* with your system's package manager ($why; see docs/install.md)" >&2
  fi
}

if [ -z "$DRY" ]; then
  if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then apt_install "Python's venv" python3-venv; fi
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  pipextras="$extras"; [ "$extras" != test ] || pipextras="test,bench,torch,jax,notebook"   # the suite runs the quick benchmark and the API bridges' tests (docs/api.md)
  stamp=".venv/.installed${pipextras:+-$pipextras}"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".${pipextras:+[$pipextras]}" 2>&1 \
      | { grep -v "^WARNING: Location 'file://" || true; }
    touch "$stamp"
  fi
fi
VPY="${SETUP_PYTHON:-.venv/bin/python}"

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
# A trusted compute backend? (the engine's own rule: studio.engine.device.choose_adapter)
if ! "$VPY" -c '
import sys
from studio.engine.device.device import choose_adapter, wgpu_module
from studio.engine.errors import StudioError
try:
    a = choose_adapter(wgpu_module(), allow_opengl=False)
except StudioError as e:
    print("setup: " + e.message, file=sys.stderr)
    sys.exit(1)
print("setup: compute adapter: %s [%s]" % (a.info["device"], a.info["backend_type"]), file=sys.stderr)
' 2>/tmp/scellis-setup-probe.$$; then
  sed 's/^/  /' /tmp/scellis-setup-probe.$$ >&2
  all_found=0
  need="$(missing_debs $VULKAN_PKGS)"
  if [ -n "$need" ] || [ -n "$DRY" ]; then
    apt_install "no Vulkan, Metal or D3D12 adapter: Mesa's Vulkan driver runs kernels on the CPU" ${need:-$VULKAN_PKGS}
  else
    echo "setup: $VULKAN_PKGS are installed but wgpu still finds no Vulkan adapter (WGPU_BACKEND_TYPE=${WGPU_BACKEND_TYPE:-unset})" >&2
  fi
else
  [ -z "$DRY" ] || sed 's/^/  /' /tmp/scellis-setup-probe.$$ >&2
fi
rm -f /tmp/scellis-setup-probe.$$

if ! QT_QPA_PLATFORM=offscreen "$VPY" -c 'from PySide6.QtWidgets import QApplication; QApplication([])' >/dev/null 2>&1; then
  all_found=0
  apt_install "Qt's offscreen platform" $QT_PKGS
fi
# Qt's xcb platform plugin needs more than ldd shows (libxcb-cursor0 is loaded at run time);
# the tests also open real windows on a virtual X display (Xvfb)
if command -v dpkg-query >/dev/null 2>&1; then
  if [ -n "${DISPLAY:-}" ]; then
    need="$(missing_debs $XCB_PKGS)"
    [ -z "$need" ] || apt_install "Qt's xcb platform, to open a window on this display" $need
  fi
  if [ "$extras" = test ]; then
    # ... and Mesa's OpenGL driver, so that the refusal of wgpu's OpenGL backend is tested for real
    need="$(missing_debs $XCB_PKGS $TEST_PKGS)"
    [ -z "$need" ] || apt_install "the tests' real windows on a virtual X display" $need
  fi
fi
if [ -z "$DRY" ] && [ "$all_found" = 1 ]; then
  stamp_inputs > "$SETUP_STAMP"           # after the installs above: the stamp sees their packages
fi
