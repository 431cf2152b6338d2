# Courier's entry points. `make run` and `make test` are the two a newcomer
# needs (see README.md).

SHELL := /usr/bin/env bash
GO ?= go
BIN_DIR := _output/bin
# component-base reads its version from these (without them Courier reports
# v0.0.0-master) and its metrics registry requires a semantic version.
VERSION ?= $(shell git describe --tags --match 'v*' 2>/dev/null || echo v0.1.0-alpha.0+$$(git rev-parse --short HEAD 2>/dev/null || echo unknown))
LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
	-X k8s.io/component-base/version.gitMajor=0 \
	-X k8s.io/component-base/version.gitMinor=1
# make image: the images are named $(IMAGE_REGISTRY)/courier and
# $(IMAGE_REGISTRY)/courier-agent (the charts' defaults) with tag IMAGE_TAG
# (a tag cannot hold the "+" of a version).
IMAGE_REGISTRY ?= ghcr.io/courier-dev
IMAGE_TAG ?= $(subst +,_,$(VERSION))
# Where make image writes the archives.
IMAGE_DIR ?= $(CURDIR)/_output/images
# Unit tests: every package but the suites that need real servers.
UNIT_PKGS := ./cmd/... ./pkg/... ./hack/localup/... ./hack/servingcert/... ./hack/flagsdoc/...
E2E_TIMEOUT ?= 45m
BENCH_TIMEOUT ?= 60m
CHAOS_TIMEOUT ?= 45m
NODE_TIMEOUT ?= 45m
# FUZZTIME is how long `make fuzz` runs each fuzz target.
FUZZTIME ?= 10m

.PHONY: all build image tools helm test test-unit test-e2e verify verify-gofmt verify-vet verify-codegen generate flags run down bench chaos test-node fuzz clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/courier-apiserver ./cmd/apiserver
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/courier-agent ./cmd/agent
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/kubectl-courier ./cmd/kubectl-courier

## image: OCI archives _output/images/courier-apiserver.oci.tar and
## courier-agent.oci.tar, each a linux/amd64 + linux/arm64 image index of
## the static binary (also in _output/bin/linux_<arch>/), non-root, the same
## digests from the same commit; no Docker, no registry (hack/image, its own
## module; docs/install.md says how to import or push them). The kubectl
## plugin for the same platforms: _output/bin/linux_<arch>/kubectl-courier,
## krew archives _output/images/kubectl-courier_linux_<arch>.tar.gz and the
## filled krew manifest _output/images/kubectl-courier.krew.yaml.
image:
	$(GO) run -C hack/image . -repo-root $(CURDIR) -out $(IMAGE_DIR) -bin-dir $(CURDIR)/_output/bin \
		-version '$(VERSION)' -ldflags '$(LDFLAGS)' -registry '$(IMAGE_REGISTRY)' -tag '$(IMAGE_TAG)'

## tools: build kube-apiserver, kube-controller-manager, kubectl and etcd from
## source (cached in ~/.cache/courier/tools; ~15-20 min the first time).
tools:
	hack/build-tools.sh

## helm: build helm v3.22.0 from source (cached next to the tools; the
## install tests lint and render artifacts/chart with it).
helm:
	hack/build-helm.sh

generate:
	hack/update-codegen.sh

## flags: docs/flags.md from both binaries' flag sets (its test in
## test-unit, hack/flagsdoc, fails when the file is out of date).
flags:
	$(GO) run ./hack/flagsdoc -o docs/flags.md

verify: verify-gofmt verify-vet verify-codegen

verify-gofmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi; echo "gofmt: ok"

verify-vet:
	$(GO) vet ./...
	$(GO) vet -C hack/image ./...

verify-codegen:
	hack/verify-codegen.sh

## test: static checks, unit tests, then the suites against real clusters.
test: verify test-unit test-e2e

# The report's browser test (pkg/plugin/report) needs chromium:
# hack/install-browser.sh installs Debian's with apt where it may; where it
# cannot, the test skips, except in CI (CI=true), where it fails.
test-unit:
	browser=$$(hack/install-browser.sh) || { echo "make test-unit: no chromium; the browser test fails in CI, skips elsewhere" >&2; browser=; }; \
	COURIER_BROWSER=$$browser $(GO) test -race -count=1 $(UNIT_PKGS)
	$(GO) test -C hack/image -race -count=1 ./...

# The tool builds run first, each checked: a failed build stops here rather
# than reaching the tests as an empty variable.
test-e2e: build
	tools=$$(hack/build-tools.sh) && helm_bin=$$(hack/build-helm.sh) && \
	COURIER_TOOLS_BIN=$$tools COURIER_HELM_BIN=$$helm_bin COURIER_BINARY=$(CURDIR)/$(BIN_DIR)/courier-apiserver \
		COURIER_AGENT_BINARY=$(CURDIR)/$(BIN_DIR)/courier-agent \
		$(GO) test -count=1 -timeout $(E2E_TIMEOUT) ./test/...

## bench: Courier at 100 and 1,000 simulated Fleet Clusters side by side
## with a client-go pool (copies/s, time to the last copy, a new HelmOp's
## creates), its memory and idle CPU holding the copies, listing the rows
## against listing ConfigMaps, and its memory under unrelated Secrets (with
## and without field copies), and pull at edge scale (10,000 simulated
## agents, COURIER_BENCH_PULL; two replicas, a rolling restart) and one
## replica against three sharing delivery (scale-out); prints one
## table with targets (see docs/benchmarks.md). Starts its own clusters:
## about 40 min on 2 cores once the tools are built.
bench: build
	COURIER_TOOLS_BIN=$$(hack/build-tools.sh) COURIER_BINARY=$(CURDIR)/$(BIN_DIR)/courier-apiserver COURIER_BENCH=1 \
		$(GO) test -count=1 -timeout $(BENCH_TIMEOUT) -v ./test/bench/ -run Bench

## chaos: faults and bad input against real clusters (docs/reliability.md): SIGKILL
## during a fan-out to 100 simulated Clusters, a downstream kube-apiserver
## down for 60 s, the upstream kube-apiserver restarted and etcd paused,
## and a catalogue of bad input; prints one table (see docs/reliability.md)
## and fails if anything is lost. About 10 min on 2 cores once the tools are
## built. Gated by COURIER_CHAOS=1, so `go test ./test/...` (make test)
## compiles the package and skips it at once.
chaos: build
	COURIER_TOOLS_BIN=$$(hack/build-tools.sh) COURIER_BINARY=$(CURDIR)/$(BIN_DIR)/courier-apiserver COURIER_CHAOS=1 \
		$(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) -v ./test/chaos/ -run TestChaos

## test-node: (root) Courier's images on a real container runtime and
## real kubelets, both charts installed with helm (docs/design.md#tests-against-real-servers):
## installs Debian's containerd, runc, CNI plugins, iproute2 and iptables
## with apt (hack/install-node-deps.sh), builds the images twice (make image,
## then IMAGE_TAG-upgrade into _output/images-upgrade for the upgrade
## step), a kubelet v1.35 (hack/build-kubelet.sh, cached; ~10 min the first
## time), the tools with kube-scheduler, and helm, then runs test/node: the
## images on containerd as their non-root user, arm64 checked, `make image`
## twice from a clone of HEAD compared; then kubelets for the upstream and a
## pulled cluster, helm install / upgrade under reads / leader deleted /
## the agent chart / helm uninstall. About 4.5 min on 2 cores once built.
## Gated by COURIER_NODE=1, so `go test ./test/...` (make test) compiles the
## package and skips it at once.
test-node:
	@if [ "$$(id -u)" != 0 ]; then \
		echo "make test-node must run as root: it installs packages with apt, starts containerd and a kubelet, mounts file systems and makes cgroups and network namespaces. Without root, run \`make test\` alone." >&2; \
		exit 1; fi
	cni=$$(hack/install-node-deps.sh) && $(MAKE) image && \
	$(MAKE) image IMAGE_TAG=$(IMAGE_TAG)-upgrade IMAGE_DIR=$(CURDIR)/_output/images-upgrade && \
	kubelet=$$(hack/build-kubelet.sh) && tools=$$(hack/build-tools.sh) && helm=$$(hack/build-helm.sh) && \
	COURIER_NODE=1 COURIER_NODE_CNI_BIN=$$cni COURIER_IMAGES_DIR=$(CURDIR)/_output/images \
		COURIER_UPGRADE_IMAGES_DIR=$(CURDIR)/_output/images-upgrade \
		COURIER_KUBELET_BIN=$$kubelet COURIER_TOOLS_BIN=$$tools COURIER_HELM_BIN=$$helm \
		$(GO) test -count=1 -timeout $(NODE_TIMEOUT) -v ./test/node/

## fuzz: every Go fuzz target for FUZZTIME each (default 10m; e.g.
## `make fuzz FUZZTIME=30s`); failing inputs land in testdata/fuzz.
fuzz:
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

## run: upstream + two downstream clusters + Courier with an example HelmOp;
## downstream-1 is pushed, downstream-2 pulled by a courier-agent process.
run: build
	$(GO) run ./hack/localup up

down:
	$(GO) run ./hack/localup down

clean:
	rm -rf _output
