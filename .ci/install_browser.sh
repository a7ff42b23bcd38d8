#!/usr/bin/env bash
# Install a headless browser for tests/test_app_browser.py: Debian's chromium package.
# Idempotent: does nothing when a chromium binary is already on PATH. Needs root (or sudo) for apt.
# The browser test drives chromium through its own DevTools protocol (from Python, with the
# tornado websocket client streamlit already depends on), so no node packages are needed.
set -euo pipefail

find_chromium() {
    for name in chromium chromium-browser google-chrome-stable google-chrome; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"
            return 0
        fi
    done
    return 1
}

if path=$(find_chromium); then
    echo "chromium already installed: $path ($("$path" --version 2>/dev/null || echo 'version unknown'))"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_browser.sh: need root or sudo to apt-get install chromium" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

path=$(find_chromium)
echo "installed chromium: $path ($("$path" --version 2>/dev/null || echo 'version unknown'))"
