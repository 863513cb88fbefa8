#!/usr/bin/env bash
# Builds, or reuses, the local Kubernetes control plane of make k8s: etcd,
# kube-apiserver, kube-scheduler and kube-controller-manager from the wrapper
# module tools/k8s (Go module proxy only; see docs/kubernetes.md).
# Prints the directory holding the binaries. A build is reused while
# tools/k8s and the Go version are unchanged: the cache key says so.
# WAKEBENCH_K8S_BIN names the directory instead of the cache.
set -euo pipefail
cd "$(dirname "$0")/../tools/k8s"
ver=v1.34.3 # k8s.io/kubernetes in tools/k8s/go.mod
key=$( (cat go.mod go.sum etcd/main.go; go version) | sha256sum | cut -c1-12)
dir=${WAKEBENCH_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/wakebench/k8s-$ver-$key}
if [ -f "$dir/.complete" ]; then
	echo "k8s: reusing $dir" >&2
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"
echo "k8s: building the control plane $ver into $dir (minutes on 2 cores, once)" >&2
start=$(date +%s)
# Version stamps: unstamped binaries say v0.0.0-master+\$Format:%H\$, which
# kubectl and client-go's discovery refuse to parse.
pkg=k8s.io/component-base/version
ld="-s -w -X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=34 -X $pkg.gitTreeState=clean"
go build -trimpath -ldflags "$ld" -o "$dir/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	./etcd
touch "$dir/.complete"
echo "k8s: built in $(($(date +%s) - start)) s" >&2
echo "$dir"
