#!/bin/sh
# Rebuilds the vendored CodeMirror bundle from the pinned npm packages (package-lock.json):
#   tools/codemirror/build.sh
# The build happens in a temporary folder; only the bundle is written, to
# webapp/static/vendor/codemirror-<@codemirror/view version>.min.js, and its sha256 is
# printed for webapp/static/vendor/VERSIONS.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
vendor="$here/../../webapp/static/vendor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$here/entry.js" "$work/"
cd "$work"
npm ci --no-audit --no-fund --silent
version=$(node -p 'JSON.parse(require("fs").readFileSync("node_modules/@codemirror/view/package.json")).version')
out="$vendor/codemirror-$version.min.js"
./node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --target=es2020 \
  --legal-comments=none --outfile="$out"
sha256sum "$out"
