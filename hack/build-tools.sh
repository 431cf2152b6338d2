#!/usr/bin/env bash
# Builds the real Kubernetes and etcd binaries that Courier's tests and
# `make run` use, from source through the Go module proxy (no binary
# downloads). Results are cached outside the work tree, keyed by version, so a
# second run (or CI on the same machine) only checks that they exist.
#
#   hack/build-tools.sh            build what is missing, print the bin dir
#   COURIER_TOOLS_DIR=... overrides the cache location.
#
# Built: kube-apiserver, kube-controller-manager, kube-scheduler (the node
# suite's, so that Pods are scheduled as for users), kubectl (k8s.io/kubernetes
# v1.37.2, module hack/tools/kube) and etcd (v3.6.16, module hack/tools/etcd).
# The first build takes about 15-20 minutes on 2 cores.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${COURIER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/tools}
bindir="$cache/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}"
mkdir -p "$bindir"

log() { echo "build-tools: $*" >&2; }

# shellcheck source=lib/kube-ldflags.sh
source "$root/hack/lib/kube-ldflags.sh"
kube_ldflags=$(kube_ldflags "$KUBE_VERSION")

missing=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [ -x "$bindir/$b" ] || missing+=("k8s.io/kubernetes/cmd/$b")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} ${KUBE_VERSION} (first time: ~15 min on 2 cores)"
  start=$(date +%s)
  (cd "$root/hack/tools/kube" && go build -trimpath -ldflags "$kube_ldflags" -o "$bindir/" "${missing[@]}")
  log "kubernetes binaries built in $(( $(date +%s) - start ))s"
fi

if [ ! -x "$bindir/etcd" ]; then
  log "building etcd ${ETCD_VERSION}"
  start=$(date +%s)
  (cd "$root/hack/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$bindir/etcd" go.etcd.io/etcd/server/v3)
  log "etcd built in $(( $(date +%s) - start ))s"
fi

echo "$bindir"
