# Shared settings for hack/ scripts. Source it; do not run it.
#
# Everything built from the Go module proxy is cached outside the repository,
# keyed by version (a stamp file per binary records exactly what was built),
# so a clean clone reuses it and a cold machine rebuilds it.
PPT_CACHE=${PPT_CACHE:-$HOME/.cache/provider-postgresql-tenant}
PPT_BIN=${PPT_BIN:-$PPT_CACHE/bin}
PPT_BUILD=${PPT_BUILD:-$PPT_BIN/.build}
export PPT_CACHE PPT_BIN GOWORK=off

# Versions of every real component. Each is one the Go module proxy serves
# (see ../shared/recipes/README.md for why these exact ones).
K8S_VERSION=${K8S_VERSION:-v1.35.4}          # kube-apiserver, kube-controller-manager, kubectl
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
ESO_VERSION=${ESO_VERSION:-v0.16.2}          # v1.x has unpublished submodules
BAO_MODULE_VERSION=v0.0.0-20250828202315-f9407a27fbee   # = tag v2.4.0
BAO_VERSION=2.4.0
CROSSPLANE_CLI_VERSION=${CROSSPLANE_CLI_VERSION:-v2.5.0}
CROSSPLANE_CORE_VERSION=${CROSSPLANE_CORE_VERSION:-v2.4.0}
FN_PAT_VERSION=${FN_PAT_VERSION:-v0.10.7}    # function-patch-and-transform
FN_AUTO_READY_VERSION=${FN_AUTO_READY_VERSION:-v0.7.0}
CRANE_VERSION=${CRANE_VERSION:-v0.22.1}
PG_MAJOR=${PG_MAJOR:-15}

log() { echo "[$(basename "$0") $(date +%H:%M:%S)] $*" >&2; }

# stamp_ok NAME STAMP: the binary exists and was built from exactly STAMP.
stamp_ok() {
  [ -z "${FORCE:-}" ] && [ -x "$PPT_BIN/$1" ] && [ "$(cat "$PPT_BIN/.stamps/$1" 2>/dev/null)" = "$2" ]
}
write_stamp() { mkdir -p "$PPT_BIN/.stamps"; echo "$2" > "$PPT_BIN/.stamps/$1"; }
