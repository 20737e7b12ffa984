#!/usr/bin/env bash
# install-postgres.sh - makes sure PostgreSQL $PG_MAJOR server binaries exist
# (Debian's package; preinstalled on these machines) and, when running as
# root, that a 'postgres' system user exists to run the test servers as
# (PostgreSQL refuses to run as root).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bin=${PG_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
if [ -x "$bin/postgres" ] && [ -x "$bin/initdb" ]; then
  log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') present in $bin"
else
  [ "$(id -u)" = 0 ] || { log "PostgreSQL $PG_MAJOR is missing and installing it needs root: apt-get install postgresql-$PG_MAJOR"; exit 1; }
  log "installing postgresql-$PG_MAJOR from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "postgresql-$PG_MAJOR" >/dev/null
  # The package starts a cluster of its own; the tests run their own servers.
  (service postgresql stop || pg_ctlcluster "$PG_MAJOR" main stop || true) >/dev/null 2>&1
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
fi
