# Sourced by hack/build-tools.sh and hack/build-kubelet.sh.
#
# kube_ldflags VERSION prints the -ldflags a Kubernetes binary built from
# k8s.io/kubernetes at VERSION (v1.MINOR.PATCH) needs: without the version
# variables, component-base and client-go report v0.0.0-master, and a
# kubelet or kube-apiserver that says so confuses version skew checks.
kube_ldflags() {
  local version=$1 minor
  minor=${version#v1.}; minor=${minor%%.*}
  echo "-s -w \
 -X k8s.io/component-base/version.gitVersion=${version} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=${version} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
}
