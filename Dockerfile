# Courier's image: a static courier-apiserver on distroless, running as the
# non-root user 65532. Build from the repository root:
#
#   docker build --build-arg VERSION=$(git describe --tags --match 'v*' --always) \
#     -t ghcr.io/courier-dev/courier:v0.1.0-alpha.0 .
#
# VERSION feeds the same ldflags as the Makefile: without them Courier
# reports v0.0.0-master, and its metrics registry needs a semantic version.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that source edits reuse the module download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG VERSION=v0.1.0-alpha.0
# CGO_ENABLED=0: a static binary, nothing needed from the base image.
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w \
        -X k8s.io/component-base/version.gitVersion=${VERSION} \
        -X k8s.io/component-base/version.gitMajor=0 \
        -X k8s.io/component-base/version.gitMinor=1" \
      -o /out/courier-apiserver ./cmd/apiserver

# distroless/static: CA certificates and /etc/passwd with the nonroot user,
# no shell, no package manager.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/courier-apiserver /usr/local/bin/courier-apiserver
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/courier-apiserver"]
