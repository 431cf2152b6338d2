#!/usr/bin/env bash
# Installs what `make test-node` needs from Debian's own packages (docs/design.md#tests-against-real-servers):
# containerd, runc, the CNI plugins, iproute2 and iptables. Root only;
# idempotent: packages already installed are left alone, and apt is asked
# nothing when none is missing. Nothing is downloaded from anywhere but apt.
#
#   hack/install-node-deps.sh      install what is missing, print the CNI bin dir
set -euo pipefail

log() { echo "install-node-deps: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "must run as root (it installs packages with apt-get)"
  exit 1
fi

packages=(containerd runc containernetworking-plugins iproute2 iptables)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get update -q >&2
  # --no-install-recommends: containerd's recommends are not needed here.
  timeout 900 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
else
  log "all of ${packages[*]} installed"
fi

# Debian's containerd package enables and starts a system containerd when
# systemd runs; the suite starts its own with its own socket and state, so
# a system one (if any) is left as it is.
for b in containerd ctr runc ip iptables; do
  command -v "$b" >/dev/null || { log "$b not found after install"; exit 1; }
done
for d in /usr/lib/cni /opt/cni/bin; do
  if [ -x "$d/bridge" ]; then
    echo "$d"
    exit 0
  fi
done
log "no CNI bridge plugin in /usr/lib/cni or /opt/cni/bin"
exit 1
