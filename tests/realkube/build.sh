#!/usr/bin/env bash
# Builds (or reuses) the kube-apiserver and etcd binaries the real-cluster test tier starts,
# and helm, which lints and renders the agent's chart (deploy/helm) for that tier.
#
# Both come from their published Go modules, pinned by the two small modules beside this script:
# gomod/apiserver (k8s.io/kubernetes, its staging modules mapped to their v0.X.Y releases) and
# gomod/etcd (go.etcd.io/etcd/server/v3), and gomod/helm (helm.sh/helm/v4). The binaries are cached
# by version outside the work tree, so a second run on the same machine builds nothing; helm is
# linked into the same directory.
#
# The last line on stdout is the directory holding `kube-apiserver` and `etcd`:
#   AGENTWATCH_REALKUBE_BIN=$(bash tests/realkube/build.sh | tail -1)
# Environment: AGENTWATCH_REALKUBE_CACHE (default ~/.cache/agentwatch-realkube),
#              AGENTWATCH_REALKUBE_JOBS (parallel compile jobs, default: all cores).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

say() { echo "realkube: $*" >&2; }

command -v go >/dev/null 2>&1 || {
  say "Go is not installed: the real-cluster tier builds kube-apiserver and etcd from Go modules"
  exit 1
}

# The versions live in the go.mod files only, so bumping one is a one-line change there.
module_version() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }
                 $1 == "require" && $2 == m && $3 ~ /^v/ { print $3; exit }' "$1"
}
k8s_version=$(module_version "$here/gomod/apiserver/go.mod" k8s.io/kubernetes)
etcd_version=$(module_version "$here/gomod/etcd/go.mod" go.etcd.io/etcd/server/v3)
helm_version=$(module_version "$here/gomod/helm/go.mod" helm.sh/helm/v4)
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] && [ -n "$helm_version" ] ||
  { say "cannot read the pinned versions"; exit 1; }

cache_root="${AGENTWATCH_REALKUBE_CACHE:-$HOME/.cache/agentwatch-realkube}"
bin_dir="$cache_root/k8s-$k8s_version-etcd-$etcd_version"
mkdir -p "$bin_dir"

export CGO_ENABLED=0 GOFLAGS=-mod=mod
jobs="${AGENTWATCH_REALKUBE_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# build <module dir> <package> <output name> [extra ldflags] [output dir]: writes beside the
# target, then renames, so an interrupted build never leaves a half-written binary that a later
# run would trust.
build() {
  local dir=$1 package=$2 name=$3 extra=${4:-} out=${5:-$bin_dir}
  if [ -x "$out/$name" ]; then
    say "$name: cached"
    return
  fi
  say "$name: building $package (this takes a while the first time)"
  local started=$SECONDS
  mkdir -p "$out"
  (cd "$dir" && nice -n 10 go build -p "$jobs" -trimpath -ldflags "-s -w $extra" \
    -o "$out/.$name.partial" "$package")
  mv -f "$out/.$name.partial" "$out/$name"
  say "$name: built in $((SECONDS - started)) s"
}

# kube-apiserver reports the version it was built from (as `make` in kubernetes stamps it), so
# /version and the effective compatibility version match the pinned release.
minor=${k8s_version#v1.}; minor=${minor%%.*}
version_pkg=k8s.io/component-base/version
k8s_ldflags="-X $version_pkg.gitVersion=$k8s_version -X $version_pkg.gitMajor=1"
k8s_ldflags+=" -X $version_pkg.gitMinor=$minor -X $version_pkg.gitTreeState=clean"

build "$here/gomod/etcd" go.etcd.io/etcd/server/v3 etcd
build "$here/gomod/apiserver" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$k8s_ldflags"

# helm has its own versioned folder (a new helm does not rebuild the API server), linked here.
helm_dir="$cache_root/helm-$helm_version"
build "$here/gomod/helm" helm.sh/helm/v4/cmd/helm helm \
  "-X helm.sh/helm/v4/internal/version.version=$helm_version" "$helm_dir"
ln -sfn "$helm_dir/helm" "$bin_dir/helm"

"$bin_dir/etcd" --version >&2
"$bin_dir/helm" version --short >&2
"$bin_dir/kube-apiserver" --version >&2
echo "$bin_dir"
