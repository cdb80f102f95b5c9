# syntax=docker/dockerfile:1
#
# didnmf as a container image: a static binary (no cgo) on Debian slim, run as a non-root
# user, `didnmf serve` by default (deploy/docker/entrypoint.sh). See deploy/README.md.
#
#   docker build -t didnmf .
#   docker run --rm didnmf --version
#
# The build stamps the version from the source's git metadata (the .git directory is part of
# the context). From a tree without it, or a git worktree (whose .git points outside the
# context), build with --build-arg GOFLAGS=-buildvcs=false.

ARG GO_VERSION=1.26

# build: the static binary.
FROM golang:${GO_VERSION}-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG GOFLAGS=""
RUN CGO_ENABLED=0 go build -trimpath -o /out/didnmf ./cmd/didnmf \
 && /out/didnmf --version

# runtime: the binary, a user of its own, the data directory and the data root.
FROM debian:trixie-slim AS runtime
RUN groupadd --system --gid 65532 didnmf \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/didnmf --no-create-home --shell /usr/sbin/nologin didnmf \
 && mkdir -p /var/lib/didnmf /data \
 && chown 65532:65532 /var/lib/didnmf /data \
 && chmod 0700 /var/lib/didnmf
COPY --from=build /out/didnmf /usr/local/bin/didnmf
COPY deploy/docker/entrypoint.sh /usr/local/bin/didnmf-entrypoint
# The node's own directory (its --data-dir, node/, and the cluster secret the first node makes)
# and the data root under which it reads job inputs and writes --out-shared results.
VOLUME ["/var/lib/didnmf", "/data"]
# gossip (TCP and UDP), actor (gRPC), data plane, HTTP (dashboard, API, /metrics, probes).
EXPOSE 7946/tcp 7946/udp 7947/tcp 7948/tcp 8265/tcp
USER 65532:65532
WORKDIR /var/lib/didnmf
ENTRYPOINT ["/usr/local/bin/didnmf-entrypoint"]
