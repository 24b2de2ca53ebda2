#!/usr/bin/env bash
# A real kube-apiserver for the tests in internal/deploy (the chart, the
# example CRDs, headroom run with deploy.type kubernetes), from the shared
# scripts in ../shared/servers/kube-apiserver: Kubernetes v1.32.4 built from
# its Go module, once per machine, into the user cache, where the tests look
# (or $HEADROOM_KUBE_APISERVER); started over Debian's etcd-server on loopback.
#
#   .ci/kube-apiserver.sh build       build it unless the cached one is current; print its path
#   .ci/kube-apiserver.sh path        print where it is (or would be) built
#   .ci/kube-apiserver.sh start DIR   start it and etcd; KUBECONFIG=DIR/kubeconfig; pids in DIR/*.pid
#
# The first build needs the Go module proxy and takes 5-20 minutes on 2
# cores; later ones are seconds from the build cache, or nothing at all.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="$root/../shared/servers/kube-apiserver"
bin="${HEADROOM_KUBE_APISERVER:-${XDG_CACHE_HOME:-$HOME/.cache}/headroom/kube-apiserver}"
case "${1:-}" in
path)
  echo "$bin" ;;
build)
  [ -f "$shared/build.sh" ] || { echo "no $shared/build.sh" >&2; exit 1; }
  if [ -x "$bin" ] && [ "$bin" -nt "$shared/go.mod.in" ] && [ "$bin" -nt "$shared/build.sh" ]; then
    echo "$bin"; exit 0
  fi
  mkdir -p "$(dirname "$bin")"
  bash "$shared/build.sh" "$bin.tmp" >&2
  mv "$bin.tmp" "$bin"
  echo "$bin" ;;
start)
  [ -n "${2:-}" ] || { echo "usage: $0 start DIR" >&2; exit 2; }
  [ -x "$bin" ] || { echo "$bin is not built: $0 build" >&2; exit 1; }
  bash "$shared/start.sh" "$bin" "$2" ;;
*)
  echo "usage: $0 build | path | start DIR" >&2; exit 2 ;;
esac
