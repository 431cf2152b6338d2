#!/usr/bin/env bash
# Installs Debian's chromium for the report's browser test
# (pkg/plugin/report/browser: `kubectl courier report -o html` opened in a
# real headless browser). Idempotent: an installed chromium is left alone
# and apt is asked nothing. Nothing is downloaded from anywhere but apt.
# Prints the browser's path.
#
#   hack/install-browser.sh      install chromium if missing, print its path
set -euo pipefail

log() { echo "install-browser: $*" >&2; }

find_browser() {
  for b in chromium chromium-browser; do
    if command -v "$b" >/dev/null; then
      command -v "$b"
      return 0
    fi
  done
  return 1
}

if path=$(find_browser); then
  log "chromium installed: $path"
  echo "$path"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  log "chromium is not installed and installing it needs root (apt-get install chromium)"
  exit 1
fi

log "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
timeout 600 apt-get update -q >&2
timeout 1200 apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >&2

if path=$(find_browser); then
  echo "$path"
  exit 0
fi
log "chromium not found after install"
exit 1
