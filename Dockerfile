# headroom in a container: a static binary on a distroless base, run as non-root.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t headroom:dev .
#   docker run --rm headroom:dev run            # rehearsal against the built-in simulator
#
# Not built in CI here (no container engine where it was written); see docs/kubernetes.md.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so source edits do not refetch them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/headroom ./cmd/headroom

# distroless/static: CA certificates, /etc/passwd with a nonroot user, tzdata; no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/headroom /usr/local/bin/headroom
USER 65532:65532
WORKDIR /work
# headroom's own metrics (headroom run --metrics-addr :9464).
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/headroom"]
CMD ["--help"]
