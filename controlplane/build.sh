#!/usr/bin/env bash
# `make cluster-binaries`: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler (one binary, kube), KWOK and kube-state-metrics, built from the
# Go module proxy at the versions pinned in controlplane/*/go.mod and go.sum,
# into $PORTAL_CLUSTER_CACHE/bin (default ~/.cache/gpu-portal/cluster/bin).
# A binary whose inputs (its module's files and the Go version) have not
# changed since it was built is not built again.
set -euo pipefail
cd "$(dirname "$0")"
cache=${PORTAL_CLUSTER_CACHE:-$HOME/.cache/gpu-portal/cluster}
mkdir -p "$cache/bin"
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly
# Where the Go installers put it, for shells whose PATH lacks it.
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"

if ! command -v go >/dev/null; then
  echo "make cluster-binaries needs Go 1.26 or newer (go.dev/dl, or Debian's golang-1.26); none is on PATH" >&2
  exit 1
fi

kubernetes=$(awk '$1 == "k8s.io/kubernetes" {print $2}' kube/go.mod)
version_flags="-X k8s.io/component-base/version.gitVersion=$kubernetes"
version_flags+=" -X k8s.io/component-base/version.gitMajor=$(echo "${kubernetes#v}" | cut -d. -f1)"
version_flags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$kubernetes" | cut -d. -f2)"
version_flags+=" -X k8s.io/component-base/version.gitTreeState=clean"

build() {  # name, module folder, package, extra ldflags
  local name=$1 module=$2 package=$3 ldflags="-s -w ${4:-}"
  local stamp
  stamp=$( (go version; echo "$ldflags"; cd "$module" && cat go.mod go.sum && { cat ./*.go 2>/dev/null || true; }) | sha256sum | cut -c1-16)
  if [ -x "$cache/bin/$name" ] && [ "$(cat "$cache/bin/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$name: up to date ($cache/bin/$name)"
    return
  fi
  echo "$name: building $package"
  local started=$SECONDS
  (cd "$module" && go build -trimpath -ldflags "$ldflags" -o "$cache/bin/$name.new" "$package")
  mv "$cache/bin/$name.new" "$cache/bin/$name"
  echo "$stamp" > "$cache/bin/.$name.stamp"
  echo "$name: built in $((SECONDS - started)) s"
}

build kube kube . "$version_flags"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
build kube-state-metrics kube-state-metrics k8s.io/kube-state-metrics/v2
for name in etcd kube-apiserver kube-controller-manager kube-scheduler; do
  ln -sf kube "$cache/bin/$name"
done
