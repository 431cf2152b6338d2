#!/usr/bin/env bash
# Builds the kubelet of `make test-node` (docs/design.md#tests-against-real-servers) from source through
# the Go module proxy (no binary download), like hack/build-tools.sh does
# for the v1.37 tools, and caches it next to them keyed by version, so a
# second run only checks that it exists.
#
#   hack/build-kubelet.sh          build the kubelet if missing, print its bin dir
#   COURIER_TOOLS_DIR=... overrides the cache location.
#
# v1.35: the last kubelet that works with containerd 1.x and (with
# failCgroupV1: false) on cgroup v1; module hack/tools/kubelet.
set -euo pipefail

KUBELET_VERSION=v1.35.4
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${COURIER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/tools}
bindir="$cache/kubelet-${KUBELET_VERSION}"

log() { echo "build-kubelet: $*" >&2; }

if [ ! -x "$bindir/kubelet" ]; then
  mkdir -p "$bindir"
  # shellcheck source=lib/kube-ldflags.sh
  source "$root/hack/lib/kube-ldflags.sh"
  ldflags=$(kube_ldflags "$KUBELET_VERSION")
  log "building kubelet ${KUBELET_VERSION} (first time: about 10 minutes on 2 cores)"
  start=$(date +%s)
  # Into a temporary name, then renamed: an interrupted build never leaves a
  # half-written kubelet that a later run would trust.
  tmp="$bindir/.kubelet.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$root/hack/tools/kubelet" && go build -trimpath -ldflags "$ldflags" -o "$tmp" k8s.io/kubernetes/cmd/kubelet)
  mv "$tmp" "$bindir/kubelet"
  log "kubelet built in $(( $(date +%s) - start ))s"
fi

echo "$bindir"
