#!/usr/bin/env bash
# install-k8s.sh [COMPONENT ...] - builds the local Kubernetes control plane
# from the Go module proxy only (no Docker, no other downloads) into $PPT_BIN:
#   etcd                      go.etcd.io/etcd/server/v3 $ETCD_VERSION
#   kube-apiserver            k8s.io/kubernetes $K8S_VERSION
#   kube-controller-manager   (namespace deletion, garbage collection)
#   kubectl
#   kubelet, kube-scheduler, kube-proxy
#                             the test node (real Pods; the Debian packages
#                             beside them: hack/install-node.sh)
#   external-secrets          ESO controller $ESO_VERSION, CRDs in $PPT_BIN/eso-crds
#   eso-crds                  those CRDs alone
# Default: etcd kube-apiserver. Idempotent: a binary that reports the wanted
# version (or whose stamp matches) is skipped.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver)
wanted() { [[ " ${want[*]} " == *" $1 "* ]]; }
mkdir -p "$PPT_BIN" "$PPT_BUILD"

# have BIN WANT ARGS...: BIN exists and "BIN ARGS" prints WANT.
have() {
  [ -z "${FORCE:-}" ] && [ -x "$PPT_BIN/$1" ] || return 1
  local out; out=$("$PPT_BIN/$1" "${@:3}" 2>&1) || true
  [[ $out == *"$2"* ]]
}

# ---------- etcd ----------
if wanted etcd; then
  if have etcd "etcd Version: ${ETCD_VERSION#v}" --version; then
    log "etcd $ETCD_VERSION present"
  else
    building etcd
    d=$PPT_BUILD/etcd-$ETCD_VERSION; mkdir -p "$d"
    if [ ! -s "$d/go.sum" ]; then
      printf 'module ppt.local/etcdbin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n\ntool go.etcd.io/etcd/server/v3\n' "$ETCD_VERSION" > "$d/go.mod"
      (cd "$d" && go mod tidy)
    fi
    (cd "$d" && go build -trimpath -ldflags='-s -w' -o "$PPT_BIN/.etcd.tmp" go.etcd.io/etcd/server/v3)
    mv "$PPT_BIN/.etcd.tmp" "$PPT_BIN/etcd"
    built etcd
  fi
fi

# ---------- kube-apiserver, kube-controller-manager, kubectl, the node's ----------
k8s_cmds=(kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler kube-proxy)
todo=()
for b in "${k8s_cmds[@]}"; do
  wanted "$b" || continue
  if [ "$b" = kubectl ]; then have kubectl "$K8S_VERSION" version --client || todo+=("$b")
  else have "$b" "$K8S_VERSION" --version || todo+=("$b"); fi
done
if [ ${#todo[@]} -eq 0 ]; then
  for b in "${k8s_cmds[@]}"; do
    if wanted "$b"; then log "kubernetes binaries present"; break; fi
  done
else
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  staging=v0.${K8S_VERSION#v1.}
  d=$PPT_BUILD/k8s-$K8S_VERSION; mkdir -p "$d"
  # The wrapper lists every command as a tool, so that go.sum covers all of
  # them; one made before the node's commands were added is made again.
  if [ ! -s "$d/go.sum" ] || ! grep -q 'cmd/kube-proxy' "$d/go.mod"; then
    # k8s.io/kubernetes replaces each staging module with ./staging/src/...;
    # the wrapper replaces each with the published k8s.io/<name> v0.X.Y.
    printf 'module ppt.local/k8sbins\n\ngo 1.25.0\n' > "$d/go.mod"
    mod=$(cd "$d" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
    {
      printf 'module ppt.local/k8sbins\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\ntool (\n' "$(sed -n 's/^go //p' "$mod")" "$K8S_VERSION"
      printf '\tk8s.io/kubernetes/cmd/%s\n' "${k8s_cmds[@]}"
      printf ')\n\nreplace (\n'
      sed -n "s#^\s*\(k8s.io/[a-z0-9-]*\) => \./staging/src/.*#\t\1 => \1 $staging#p" "$mod"
      printf ')\n'
    } > "$d/go.mod"
    log "go mod tidy for k8s.io/kubernetes $K8S_VERSION"
    (cd "$d" && go mod tidy)
  fi
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for b in "${todo[@]}"; do
    building "$b"
    (cd "$d" && go build -trimpath -ldflags="$ldf" -o "$PPT_BIN/.$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$PPT_BIN/.$b.tmp" "$PPT_BIN/$b"
    built "$b"
  done
fi

# ---------- External Secrets Operator ----------
# ESO is built with the secret stores and generators the project uses
# only (its release registers some thirty cloud providers, about half of a
# cold build's packages): a copy of the module whose two registration
# files keep these, and nothing else changed.
ESO_PROVIDERS="vault kubernetes fake"
ESO_GENERATORS="vault password fake"
# eso_module sets esodir to ESO's module in the module cache (downloaded
# when missing); eso_crds copies its CRDs to $PPT_BIN/eso-crds.
eso_module() {
  esodir=$(cd "$d" && go mod download -json "github.com/external-secrets/external-secrets@$ESO_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [ -d "$esodir" ] || { log "cannot download external-secrets $ESO_VERSION"; exit 1; }
}
eso_crds() {
  rm -rf "$PPT_BIN/eso-crds"; mkdir -p "$PPT_BIN/eso-crds"
  cp "$esodir"/config/crds/bases/*.yaml "$PPT_BIN/eso-crds/"
  rm -f "$PPT_BIN/eso-crds/kustomization.yaml"; chmod u+w "$PPT_BIN"/eso-crds/*.yaml
  echo "$ESO_VERSION" > "$PPT_BIN/eso-crds/.version"
}
# eso-crds alone: ESO's CRDs without its binary (for `make build`, which
# validates the examples against them).
if wanted eso-crds && ! wanted external-secrets; then
  if [ "$(cat "$PPT_BIN/eso-crds/.version" 2>/dev/null)" = "$ESO_VERSION" ]; then
    log "external-secrets $ESO_VERSION CRDs present"
  else
    d=$PPT_BUILD/eso-$ESO_VERSION; mkdir -p "$d"
    eso_module
    eso_crds
    log "copied external-secrets $ESO_VERSION CRDs to $PPT_BIN/eso-crds"
  fi
fi
if wanted external-secrets; then
  stamp="github.com/external-secrets/external-secrets@$ESO_VERSION providers=$ESO_PROVIDERS generators=$ESO_GENERATORS"
  if stamp_ok external-secrets "$stamp" && [ "$(cat "$PPT_BIN/eso-crds/.version" 2>/dev/null)" = "$ESO_VERSION" ]; then
    log "external-secrets $ESO_VERSION and its CRDs present"
  else
    d=$PPT_BUILD/eso-$ESO_VERSION; mkdir -p "$d"
    eso_module
    # keep_only FILE PREFIX NAME...: of FILE's blank imports of PREFIX/*,
    # those of PREFIX/NAME only.
    keep_only() {
      local f=$1 prefix=$2 n pat=""; shift 2
      for n in "$@"; do pat="$pat${pat:+|}$n"; done
      sed -i -E "/^[[:space:]]*_ \"${prefix//\//\\/}\//{/\/($pat)\"\$/!d}" "$f"
    }
    rm -rf "$d/src"; cp -r "$esodir" "$d/src"; chmod -R u+w "$d/src"
    # shellcheck disable=SC2086 # word lists
    keep_only "$d/src/pkg/provider/register/register.go" github.com/external-secrets/external-secrets/pkg/provider $ESO_PROVIDERS
    # shellcheck disable=SC2086 # word lists
    keep_only "$d/src/pkg/generator/register/register.go" github.com/external-secrets/external-secrets/pkg/generator $ESO_GENERATORS
    if [ ! -s "$d/go.sum" ] || ! grep -q '=> ./src' "$d/go.mod"; then
      cat > "$d/go.mod" <<EOM
module ppt.local/esobin

go 1.24.2

require github.com/external-secrets/external-secrets $ESO_VERSION

tool github.com/external-secrets/external-secrets

replace github.com/external-secrets/external-secrets => ./src

// from external-secrets' own go.mod (a dependency's replace directives are ignored)
replace github.com/Masterminds/sprig/v3 => github.com/external-secrets/sprig/v3 v3.3.0
EOM
      cp "$esodir/go.sum" "$d/go.sum"; chmod u+w "$d/go.sum"
      (cd "$d" && go mod tidy)
    fi
    eso_crds
    if ! stamp_ok external-secrets "$stamp"; then
      building external-secrets
      (cd "$d" && go build -trimpath -ldflags='-s -w' -o "$PPT_BIN/.external-secrets.tmp" github.com/external-secrets/external-secrets)
      mv "$PPT_BIN/.external-secrets.tmp" "$PPT_BIN/external-secrets"
      built external-secrets
      write_stamp external-secrets "$stamp"
    fi
  fi
fi
