#!/usr/bin/env bash
# Builds (or reuses) the OpenID Connect provider the identity tests sign in through: zitadel's
# example provider (its own login page) from the published github.com/zitadel/oidc/v3 module,
# pinned in gomod/go.mod, with users and groups read from the tests' JSON file (gomod/main.go).
# The binary is cached by version outside the work tree, so a second run builds nothing.
#
# The last line on stdout is the binary's path:
#   AGENTWATCH_OIDC_PROVIDER_BIN=$(bash tests/oidc/build.sh | tail -1)
# Environment: AGENTWATCH_OIDC_CACHE (default ~/.cache/agentwatch-oidc),
#              AGENTWATCH_OIDC_JOBS (parallel compile jobs, default 1).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

say() { echo "oidc: $*" >&2; }

command -v go >/dev/null 2>&1 || {
  say "Go is not installed: the identity tests build their OpenID Connect provider from Go modules"
  exit 1
}

version=$(awk '$1 == "github.com/zitadel/oidc/v3" && $2 ~ /^v/ { print $2; exit }
               $1 == "require" && $2 == "github.com/zitadel/oidc/v3" { print $3; exit }' \
  "$here/gomod/go.mod")
[ -n "$version" ] || { say "cannot read the pinned version"; exit 1; }

# The main beside go.mod is part of what is cached: a change to it is a new binary.
source_digest=$(cat "$here/gomod/go.mod" "$here/gomod/main.go" | sha256sum | cut -c1-12)
bin_dir="${AGENTWATCH_OIDC_CACHE:-$HOME/.cache/agentwatch-oidc}/zitadel-oidc-$version-$source_digest"
binary="$bin_dir/oidc-provider"

if [ -x "$binary" ]; then
  say "oidc-provider: cached"
else
  say "oidc-provider: building github.com/zitadel/oidc/v3 $version"
  started=$SECONDS
  mkdir -p "$bin_dir"
  # Written beside the target, then renamed: an interrupted build leaves nothing to trust.
  (cd "$here/gomod" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 19 \
    go build -p "${AGENTWATCH_OIDC_JOBS:-1}" -trimpath -ldflags "-s -w" \
    -o "$bin_dir/.oidc-provider.partial" .)
  mv -f "$bin_dir/.oidc-provider.partial" "$binary"
  say "oidc-provider: built in $((SECONDS - started)) s"
fi
echo "$binary"
