#!/usr/bin/env bash
# Builds the helm command that the install tests use (helm lint, helm
# template), from source through the Go module proxy: no binary download. The
# result is cached next to the Kubernetes tools of hack/build-tools.sh, keyed
# by version, so a second run only checks that it exists.
#
#   hack/build-helm.sh            build helm if missing, print its bin dir
#   COURIER_TOOLS_DIR=... overrides the cache location.
#
# helm.sh/helm/v3 has no replace directives, so `go install module@version`
# builds it as released; no pinned module under hack/tools is needed. The
# ldflags are the ones helm's own Makefile sets: without them `helm version`
# prints "v3.22" and helm assumes Kubernetes v1.20 for .Capabilities and for
# the deprecated-API lint rule.
set -euo pipefail

HELM_VERSION=v3.22.0
# helm v3.22.0 is built against k8s.io/client-go v0.37.0; its Makefile
# derives the default Kubernetes version (1.37) from that.
HELM_KUBE_MAJOR=1
HELM_KUBE_MINOR=37
cache=${COURIER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/tools}
bindir="$cache/helm-${HELM_VERSION}"

log() { echo "build-helm: $*" >&2; }

if [ ! -x "$bindir/helm" ]; then
  mkdir -p "$bindir"
  log "building helm ${HELM_VERSION} (first time: about 7 minutes on 2 busy cores)"
  start=$(date +%s)
  ldflags="-s -w \
 -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} \
 -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=${HELM_KUBE_MAJOR} \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${HELM_KUBE_MINOR} \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=${HELM_KUBE_MAJOR} \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${HELM_KUBE_MINOR}"
  # Run outside any module so the go.mod of the caller's directory plays no
  # part; build into a temporary name and rename so an interrupted build
  # never leaves a half-written helm that a later run would trust.
  tmp=$(mktemp -d "$cache/.helm-build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && GOBIN="$tmp" CGO_ENABLED=0 \
    go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}")
  mv "$tmp/helm" "$bindir/helm"
  log "helm built in $(( $(date +%s) - start ))s"
fi

echo "$bindir"
