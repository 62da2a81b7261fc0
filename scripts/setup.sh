#!/usr/bin/env bash
# Installs what Outpost's build and tests need on a Debian/Ubuntu machine, skipping what is
# already there. Sourced by scripts/test.sh and scripts/run.sh; safe to run again.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# --- system packages --------------------------------------------------------------------
apt_install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing system packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}
apt_packages=(
  build-essential pkg-config ca-certificates curl git
  iproute2           # network namespaces for WebRTC tests (libwebrtc ignores loopback), tc for a slow link
  nftables           # packet loss on a test veth (kernels without netem, like CI's)
  espeak-ng          # speech for the audio interop tests and the voice benchmark
  python3 python3-venv python3-pip
  # The desktop app (Tauri 2 on WebKitGTK).
  libssl-dev file libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev
  libayatana-appindicator3-dev libxdo-dev
  libopus-dev        # outpost-livekit's audio tracks (the opus crate links it)
  libasound2-dev     # outpost-audio: cpal's ALSA backend
  libwebrtc-audio-processing-dev libclang-dev  # outpost-audio's echo canceller (WebRTC audio processing 0.3; bindgen needs libclang)
  pulseaudio pulseaudio-utils libasound2-plugins  # outpost-audio's tests: a private null sink via ALSA's pulse plugin
  libdbus-1-dev      # the keyring's Secret Service client (libdbus, as GTK and WebKit use)
  chromium           # the user's browser in the MCP OAuth sign-in tests (driven by playwright-core)
)
# What only the desktop app's end-to-end tests need (setup_app_test_tools, below). The test
# command sets OUTPOST_SETUP_FOR_TESTS=1 so that both lists go to apt at once.
app_test_apt_packages=(
  xvfb xauth dbus-x11 at-spi2-core webkit2gtk-driver imagemagick dunst
  gnome-keyring dbus-daemon dbus-bin xdotool python3-gi gir1.2-gtk-3.0 python3-xlib
  xdg-desktop-portal xdg-desktop-portal-kde libkf5globalaccel-bin
  rpm  # scripts/check-rpm.sh: Debian's rpm tool reads and installs the .rpm into an empty root
)
if [ "${OUTPOST_SETUP_FOR_TESTS:-0}" = 1 ]; then
  apt_install_missing "${apt_packages[@]}" "${app_test_apt_packages[@]}"
else
  apt_install_missing "${apt_packages[@]}"
fi

# --- Rust ---------------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    log "installing Rust (rustup from Debian)"
    $SUDO apt-get install -y -qq --no-install-recommends rustup
    rustup default stable
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi

# --- Node.js for the web UI (Vite 8 needs Node >= 20.19) -----------------------------------
node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)'
}
if ! node_ok; then
  log "installing Node.js and npm from Debian"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
  node_ok || { echo "Node.js >= 20.19 is needed for ui/ (found $(node --version 2>/dev/null || echo none))" >&2; exit 1; }
fi
if [ ! -d "$repo/ui/node_modules" ] || [ "$repo/ui/package-lock.json" -nt "$repo/ui/node_modules/.package-lock.json" ]; then
  log "installing the web UI's npm packages (npm ci)"
  (cd "$repo/ui" && npm ci --no-audit --no-fund --loglevel=error)
fi

# --- Python venv with the official LiveKit SDK -------------------------------------------
setup_sdk_venv() {
  local venv="$repo/.venv"
  local req="$repo/tests/py/requirements.txt"
  local stamp="$venv/.requirements.sha256"
  local want
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "creating the Python venv with the official LiveKit SDK ($venv)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    echo "$want" > "$stamp"
  fi
  export OUTPOST_PYTHON="$venv/bin/python"
}
# The test command installs the peers in the background while it builds (scripts/test.sh).
if [ "${OUTPOST_SETUP_FOR_TESTS:-0}" != 1 ]; then
  setup_sdk_venv
fi

# --- peers only the tests need (scripts/test.sh calls this; the demo does not) -------------
# A second venv with the real LiveKit Agents framework: livekit-agents pins an older livekit
# SDK than .venv's (for tests/py/lk_agent.py and examples/livekit-agents/; no pip cache
# kept, it is large enough). The MCP reference servers for outpost-mcp's tests
# (server-everything, server-filesystem, server-memory, pinned by tests/mcp/package-lock.json;
# mcp-server-time comes from PyPI with .venv).
setup_test_peers() {
  venv_agents="$repo/.venv-agents"
  req_agents="$repo/tests/py/agents-requirements.txt"
  stamp_agents="$venv_agents/.requirements.sha256"
  want_agents="$(sha256sum "$req_agents" | cut -d' ' -f1)"
  if [ ! -x "$venv_agents/bin/python" ] || [ "$(cat "$stamp_agents" 2>/dev/null)" != "$want_agents" ]; then
    log "creating the Python venv with LiveKit Agents ($venv_agents)"
    python3 -m venv "$venv_agents"
    "$venv_agents/bin/pip" install -q --disable-pip-version-check --no-cache-dir -r "$req_agents"
    echo "$want_agents" > "$stamp_agents"
  fi
  export OUTPOST_AGENTS_PYTHON="$venv_agents/bin/python"

  setup_livekit_server

  if [ ! -d "$repo/tests/mcp/node_modules" ] || [ "$repo/tests/mcp/package-lock.json" -nt "$repo/tests/mcp/node_modules/.package-lock.json" ]; then
    log "installing the MCP reference servers (npm ci in tests/mcp)"
    (cd "$repo/tests/mcp" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# --- the real livekit-server (scripts/test.sh's interop tests run against it too) ---------
# Pinned; built from the Go module proxy by the ordinary go command into a cache folder kept
# between runs (tests/src/server.rs looks there, or at $OUTPOST_LIVEKIT_SERVER). v1.13.5 is
# the newest tag whose go.mod has no `replace` lines (which `go install pkg@version` refuses)
# and that builds with Go 1.26.
LIVEKIT_SERVER_VERSION="v1.13.5"
setup_livekit_server() {
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/outpost/livekit-server-$LIVEKIT_SERVER_VERSION"
  local bin="$dir/livekit-server"
  if [ ! -x "$bin" ] || ! "$bin" --version 2>/dev/null | grep -q "${LIVEKIT_SERVER_VERSION#v}"; then
    if ! command -v go >/dev/null 2>&1 || ! go version | grep -qE 'go1\.(2[6-9]|[3-9][0-9])'; then
      echo "livekit-server $LIVEKIT_SERVER_VERSION needs Go 1.26 or newer on PATH (found: $(go version 2>/dev/null || echo none)); Debian 12's golang-go is too old" >&2
      exit 1
    fi
    log "installing livekit-server $LIVEKIT_SERVER_VERSION (go install from the Go module proxy, about 3 minutes)"
    mkdir -p "$dir"
    local gobin
    gobin="$(mktemp -d)"
    CGO_ENABLED=0 GOBIN="$gobin" go install "github.com/livekit/livekit-server/cmd/server@$LIVEKIT_SERVER_VERSION"
    mv "$gobin/server" "$bin"
    rmdir "$gobin"
  fi
  export OUTPOST_LIVEKIT_SERVER="$bin"
}

# --- end-to-end tests of the desktop app (scripts/test.sh calls this) ---------------------
# A virtual display, a D-Bus session with a notification daemon, WebKit's WebDriver,
# ImageMagick's `import` for screenshots, and tauri-driver in front of WebKitWebDriver.
# GNOME Keyring (and the D-Bus daemon and dbus-send) for the keyring test
# (tests/tests/keyring_secret_service.rs), which runs a Secret Service in a private bus.
# xdotool (real X input) and python3-gi with GTK 3: a file dragged from another window onto
# the app (src-tauri/tests/attach_app_e2e.rs, tests/py/drag_source.py); python3-gi also
# plays the desktop panel the tray registers with, and python3-xlib closes the window as a
# window manager does (tray_app_e2e.rs, tests/py/sni_host.py, close_window.py).
# The real desktop portal with KDE's backend and shortcut daemon: the shortcut through the
# portal's GlobalShortcuts (shortcut_app_e2e.rs; about 29 MB with their Qt/KF5 libraries).
setup_app_test_tools() {
  apt_install_missing "${app_test_apt_packages[@]}"
  if ! command -v tauri-driver >/dev/null 2>&1 && [ ! -x "${HOME:-/root}/.cargo/bin/tauri-driver" ]; then
    log "installing tauri-driver (cargo install, about 2 minutes)"
    cargo install tauri-driver --version '^2' --locked
  fi
}
