#!/usr/bin/env bash
# install-lint.sh - installs, idempotently, what `make lint` needs besides Go:
#   golangci-lint  pinned as a Go tool in hack/tools/golangci-lint/go.mod (its
#                  own module: its many dependencies stay out of the
#                  provider's go.mod and of the code generators' module),
#                  built into $PPT_BIN/golangci-lint-<version>; skipped when
#                  that binary exists and was built from the same go.sum
#   ShellCheck     the Debian package shellcheck, installed with apt-get when
#                  missing (as root, or through sudo otherwise)
# Prints nothing on stdout; `hack/install-lint.sh path` prints the path of the
# golangci-lint binary (for the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh

mod=hack/tools/golangci-lint
version=$(awk '$1=="github.com/golangci/golangci-lint/v2"{print $2; exit}' "$mod/go.mod")
[ -n "$version" ] || { log "no golangci-lint version in $mod/go.mod"; exit 1; }
name=golangci-lint-$version
if [ "${1:-}" = path ]; then echo "$PPT_BIN/$name"; exit 0; fi

stamp="$version $(sha256sum "$mod/go.sum" | cut -c1-16) $(go env GOVERSION)"
if stamp_ok "$name" "$stamp"; then
  log "$name present"
else
  building "$name"
  mkdir -p "$PPT_BIN"
  go -C "$mod" build -trimpath -ldflags "-s -w" -o "$PPT_BIN/.$name.tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint
  mv -f "$PPT_BIN/.$name.tmp" "$PPT_BIN/$name"
  write_stamp "$name" "$stamp"
  built "$name"
fi

if command -v shellcheck >/dev/null; then
  log "shellcheck present ($(shellcheck --version | awk '/^version:/{print $2}'))"
else
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  command -v apt-get >/dev/null || { log "shellcheck is missing and there is no apt-get: install shellcheck"; exit 1; }
  log "installing shellcheck with apt-get"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq shellcheck >/dev/null
  log "installed shellcheck $(shellcheck --version | awk '/^version:/{print $2}')"
fi
