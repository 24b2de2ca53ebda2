# headroom in a container: a static binary on a distroless base, run as non-root.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#                --build-arg REVISION=$(git rev-parse HEAD) -t <registry>/headroom:<VERSION> .
#   docker run --rm <registry>/headroom:<VERSION> --version
#   docker run --rm <registry>/headroom:<VERSION> run       # rehearsal against the built-in simulator
#
# VERSION is required: it is what `headroom --version`, headroom_run_info
# and every run directory's version.json and summary.json say ran, and the
# image label org.opencontainers.image.version. Tag the image with the same
# value, as the Helm chart's appVersion does (deploy/helm/headroom).
# Not built in CI here (no container engine where it was written); see docs/kubernetes.md.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so source edits do not refetch them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
ARG REVISION=""
RUN test -n "${VERSION}" || { echo 'set the version: docker build --build-arg VERSION=$(git describe --tags --always --dirty) .' >&2; exit 1; }
# .git is not in the build context (.dockerignore), so the version comes
# from VERSION, not from the build info.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/headroom ./cmd/headroom \
 && /out/headroom --version

# distroless/static: CA certificates, /etc/passwd with a nonroot user, tzdata; no shell.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION
ARG REVISION=""
LABEL org.opencontainers.image.title="headroom" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/headroom-bench/headroom"
COPY --from=build /out/headroom /usr/local/bin/headroom
USER 65532:65532
WORKDIR /work
# headroom's own metrics (headroom run --metrics-addr :9464); runs serve on :8080.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/headroom"]
CMD ["--help"]
