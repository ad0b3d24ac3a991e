# syntax=docker/dockerfile:1
#
# fleetbench: one static binary on distroless, run as a non-root user.
#
#   docker build -t ghcr.io/fleetbench/fleetbench:$(git describe --tags) \
#     --build-arg VERSION=$(git describe --tags) .
#   docker buildx build --platform linux/amd64,linux/arm64 ...   # multi-arch
#
# The same image runs the coordinator (fleetbench sweep / coordinator) and
# the agents (fleetbench agent); see deploy/README.md.

ARG GO_VERSION=1.26

# The builder runs on the build machine's platform and cross-compiles, so a
# multi-arch build needs no emulation: the binary is pure Go.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/fleetbench .

# distroless/static has CA certificates (for https targets), tzdata and
# /etc/passwd with the nonroot user (65532), and no shell or package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fleetbench /usr/local/bin/fleetbench
USER 65532:65532
# 7070: the coordinator's gRPC port for agents; 9090: metrics.
EXPOSE 7070 9090
ENTRYPOINT ["/usr/local/bin/fleetbench"]
