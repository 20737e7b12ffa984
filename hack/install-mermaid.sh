#!/usr/bin/env bash
# install-mermaid.sh - installs, idempotently, what test/docs parses the
# docs' Mermaid diagrams with: mermaid's own parser and jsdom, at the
# versions hack/mermaid/package-lock.json pins, from the npm registry (npm
# comes with Node.js, which hack/install-postgres.sh needs too), into
# $PPT_CACHE/mermaid beside hack/mermaid/parse.mjs. Skipped when the lock
# and the script are the ones installed.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh

dir=$PPT_CACHE/mermaid
stamp=$(cat hack/mermaid/package.json hack/mermaid/package-lock.json hack/mermaid/parse.mjs | sha256sum | cut -d' ' -f1)
if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ] && [ -d "$dir/node_modules/mermaid" ]; then
  log "mermaid present ($dir)"
  exit 0
fi
command -v npm >/dev/null || { log "npm is missing: install Node.js 20 or later (Debian: apt-get install nodejs npm)"; exit 1; }
log "installing mermaid and jsdom into $dir"
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
cp hack/mermaid/package.json hack/mermaid/package-lock.json hack/mermaid/parse.mjs "$dir.tmp/"
(cd "$dir.tmp" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
echo "$stamp" > "$dir.tmp/.stamp"
rm -rf "$dir" && mv "$dir.tmp" "$dir"
log "installed mermaid $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$dir/node_modules/mermaid/package.json" | head -n 1)"
