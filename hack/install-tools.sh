#!/usr/bin/env bash
# install-tools.sh [TOOL ...] - builds Go tools from the Go module proxy into
# $PPT_BIN, idempotently (skipped when the stamp matches).
#   tools: bao crossplane crossplane-core crane   (default: all)
# With --assets-only first, only the files a tool needs beside it (core's
# CRDs and chart templates), without building it.
#
# Why wrapper modules and not `go install pkg@version`: the proxy answers 403
# to the version list of most crossplane/openbao modules, which `go install`
# consults, and several of these modules carry replace directives that
# `go install` refuses. A throw-away module requiring the exact version,
# seeded with the tool's own go.sum, avoids both.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
export GOFLAGS="-mod=mod" CGO_ENABLED=${CGO_ENABLED:-0}

# name | module | version | package | extra "module version" require | ldflags | replacement "module version"
TOOLS=(
  # Tags v2.x are not valid versions of github.com/openbao/openbao (no /v2
  # suffix), so only the pseudo-version of tag v2.4.0 resolves.
  "bao|github.com/openbao/openbao|$BAO_MODULE_VERSION|github.com/openbao/openbao||-X github.com/openbao/openbao/version.fullVersion=$BAO_VERSION"
  # The CLI moved out of crossplane/crossplane in v2.3.
  "crossplane|github.com/crossplane/cli/v2|$CROSSPLANE_CLI_VERSION|github.com/crossplane/cli/v2/cmd/crossplane||-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$CROSSPLANE_CLI_VERSION"
  # Core, for `crossplane render --crossplane-binary` (no Docker). Its go.mod
  # replaces apis/v2 => ./apis, so the released apis module is pinned.
  "crossplane-core|github.com/crossplane/crossplane/v2|$CROSSPLANE_CORE_VERSION|github.com/crossplane/crossplane/v2/cmd/crossplane|github.com/crossplane/crossplane/apis/v2 $CROSSPLANE_CORE_VERSION|-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$CROSSPLANE_CORE_VERSION"
  "crane|github.com/google/go-containerregistry|$CRANE_VERSION|github.com/google/go-containerregistry/cmd/crane||"
)

# Files some tools need beside their binary, copied from their module, one
# "from to" pair a line: Crossplane core's CRDs (core init installs them) and
# its Helm chart's templates (the test harness installs core's and the RBAC
# manager's ClusterRoles from them).
assets_of() {
  case "$1" in
    crossplane-core) printf '%s\n' "cluster/crds crossplane-crds" "cluster/charts/crossplane/templates crossplane-chart-templates" ;;
  esac
}

copy_assets() {
  local name=$1 src=$2 a from to dir=""
  while read -r a; do
    [ -n "$a" ] || continue
    from=${a% *} to=${a#* }
    [ -d "$PPT_BIN/$to" ] && [ "$(cat "$PPT_BIN/$to/.source" 2>/dev/null)" = "$src" ] && continue
    [ -n "$dir" ] || dir=$(go mod download -json "$src" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
    [ -d "$dir/$from" ] || { log "cannot find $from in $src"; return 1; }
    rm -rf "$PPT_BIN/.$to.tmp" && cp -r "$dir/$from" "$PPT_BIN/.$to.tmp" && chmod -R u+w "$PPT_BIN/.$to.tmp"
    echo "$src" > "$PPT_BIN/.$to.tmp/.source"
    rm -rf "${PPT_BIN:?}/$to"; mv "$PPT_BIN/.$to.tmp" "$PPT_BIN/$to"
    log "copied $src/$from to $PPT_BIN/$to"
  done <<<"$(assets_of "$name")"
}

build_tool() {
  local name=$1 mod=$2 ver=$3 pkg=$4 extra=$5 ldflags=$6 repl=${7:-}
  local stamp="$mod@$ver $pkg $extra $ldflags $repl"
  local src="$mod@$ver"
  [ -n "$repl" ] && src="${repl% *}@${repl##* }"
  if stamp_ok "$name" "$stamp"; then
    log "$name present ($mod@$ver)"
    copy_assets "$name" "$src"
    return 0
  fi
  building "$name"
  local dir gover d=$PPT_BUILD/$name
  local a
  while read -r a; do
    if [ -n "$a" ]; then rm -rf "${PPT_BIN:?}/${a#* }"; fi
  done <<<"$(assets_of "$name")"
  dir=$(go mod download -json "$src" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -d "$dir" ] || { log "cannot download $src"; return 1; }
  gover=$(awk '$1=="go"{print $2; exit}' "$dir/go.mod")
  rm -rf "$d"; mkdir -p "$d"
  {
    printf 'module ppt.local/%s\n\ngo %s\n\nrequire %s %s\n' "$name" "${gover:-1.25.0}" "$mod" "$ver"
    [ -n "$extra" ] && echo "require $extra"
    [ -n "$repl" ] && echo "replace $mod => $repl"
  } > "$d/go.mod"
  cp "$dir/go.sum" "$d/go.sum"; chmod u+w "$d/go.sum"
  mkdir -p "$PPT_BIN"
  (cd "$d" && go build -trimpath -ldflags "-s -w $ldflags" -o "$PPT_BIN/.$name.tmp" "$pkg")
  mv -f "$PPT_BIN/.$name.tmp" "$PPT_BIN/$name"
  write_stamp "$name" "$stamp"
  built "$name"
  copy_assets "$name" "$src"
}

# --assets-only TOOL...: only the files beside the binary (for `make
# build`, which validates against core's CRDs without running core).
assets_only=""
if [ "${1:-}" = --assets-only ]; then assets_only=1; shift; fi
want=("$@")
rc=0
for spec in "${TOOLS[@]}"; do
  IFS='|' read -r name mod ver pkg extra ldflags repl <<<"$spec"
  if [ ${#want[@]} -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then continue; fi
  if [ -n "$assets_only" ]; then
    src="$mod@$ver"; [ -n "$repl" ] && src="${repl% *}@${repl##* }"
    copy_assets "$name" "$src" || { log "FAILED: the files of $name"; rc=1; }
    continue
  fi
  build_tool "$name" "$mod" "$ver" "$pkg" "$extra" "$ldflags" "$repl" || { log "FAILED: $name"; rc=1; }
done
exit $rc
