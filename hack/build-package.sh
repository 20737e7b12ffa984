#!/usr/bin/env bash
# build-package.sh - builds the provider's Crossplane packages without Docker,
# one per platform of $PLATFORMS (space separated, default
# "linux/amd64 linux/arm64"; PLATFORMS=linux/amd64 builds only that one):
#   1. the provider binary (static, GOOS/GOARCH of the platform);
#   2. a runtime image tarball: one layer holding /provider and /LICENSE on
#      an empty OCI base, entrypoint /provider, user 65532, the platform set
#      in its config (crane, through a throw-away local registry on loopback,
#      because `crane mutate` needs a registry);
#   3. `crossplane xpkg build` of package/ with the provider's examples and
#      that image embedded -> _output/provider-postgresql-tenant-<os>-<arch>.xpkg.
# Then:
#   - _output/provider-postgresql-tenant.xpkg: a copy of this machine's
#     platform's package (when PLATFORMS holds it), the one to install here;
#   - with more than one platform, the multi-platform package: every
#     platform's package pushed to the loopback registry as one tag
#     (`crossplane xpkg push -f a.xpkg,b.xpkg` makes an OCI image index) and
#     pulled back as an OCI image layout, _output/provider-postgresql-tenant.oci
#     (publish it with `crane push DIR REF`, or push the per-platform files
#     with `crossplane xpkg push -f`);
#   - `crossplane xpkg build` of the Configuration (package/configuration:
#     the Tenant XRDs and Compositions, depending on the provider and the
#     function) with the Tenant examples
#     -> _output/configuration-postgresql-tenant.xpkg.
# cluster/images/provider/Dockerfile is the same image for people with Docker.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
OUT=${OUTPUT:-_output}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
NAME=provider-postgresql-tenant
for b in crossplane crane; do
  [ -x "$PPT_BIN/$b" ] || { echo "$PPT_BIN/$b not found: run make build-tools" >&2; exit 1; }
done
read -r -a platforms <<<"$PLATFORMS"
[ ${#platforms[@]} -gt 0 ] || { echo "PLATFORMS is empty" >&2; exit 2; }
for p in "${platforms[@]}"; do
  [[ $p =~ ^linux/[a-z0-9]+$ ]] || { echo "platform $p: want linux/<arch> (the provider runs on Linux only)" >&2; exit 2; }
done
host=linux/$(go env GOARCH)
source_url=$(sed -n 's|^ *meta.crossplane.io/source: *||p' package/crossplane.yaml)
license=$(sed -n 's|^ *meta.crossplane.io/license: *||p' package/crossplane.yaml)
[ -f LICENSE ] || { echo "LICENSE not found" >&2; exit 1; }

mkdir -p "$OUT"
rm -rf "$OUT/image" "$OUT/layer.tar" "$OUT/provider-image.tar"
rm -f "$OUT/configuration-postgresql-tenant.xpkg"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 45731)
"$PPT_BIN/crane" registry serve --address "127.0.0.1:$port" > "$OUT/registry.log" 2>&1 &
reg=$!
trap 'kill $reg 2>/dev/null || true' EXIT
up=""
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
[ -n "$up" ] || { echo "the loopback registry did not start:" >&2; cat "$OUT/registry.log" >&2; exit 1; }
repo=127.0.0.1:$port
# crane and the push log every blob: keep that in a file, show it on failure.
: > "$OUT/image-tools.log"
quiet() {
  "$@" >>"$OUT/image-tools.log" 2>&1 || { echo "failed: $*" >&2; tail -n 20 "$OUT/image-tools.log" >&2; return 1; }
}

# Examples of each package: the provider's (a config, a Database, an
# ExternalSecret for it) and the Configuration's (a Tenant and what it needs
# in the app namespace; not the generated copies of the package itself).
rm -rf "$OUT/examples-provider" "$OUT/examples-configuration"
mkdir -p "$OUT/examples-provider" "$OUT/examples-configuration/tenant"
cp -r examples/provider examples/database "$OUT/examples-provider/"
cp examples/tenant/*.yaml "$OUT/examples-configuration/tenant/"

# build_packages NAME ENTRYPOINT CMD ROOT IGNORE EXAMPLES: for each platform,
# the static binary of ./CMD as /ENTRYPOINT with /LICENSE in a one-layer
# image, embedded in `crossplane xpkg build` of ROOT -> $OUT/NAME-linux-<arch>.xpkg;
# this machine's platform's copied to $OUT/NAME.xpkg, and with more than
# one platform the OCI image layout of the index, $OUT/NAME.oci.
build_packages() {
  local name=$1 entry=$2 cmd=$3 root=$4 ignore=$5 examples=$6
  local built=() p arch t0 dir pkg files
  rm -rf "$OUT/$name.oci"
  rm -f "$OUT/$name.xpkg" "$OUT/$name"-linux-*.xpkg
  for p in "${platforms[@]}"; do
    arch=${p#linux/} t0=$SECONDS
    dir=$OUT/image/$name-$arch
    mkdir -p "$dir"
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags='-s -w' -o "$dir/$entry" "./$cmd"
    cp LICENSE "$dir/LICENSE"
    chmod 0755 "$dir/$entry" && chmod 0644 "$dir/LICENSE"
    tar -C "$dir" --sort=name --mtime=@0 --owner=65532 --group=65532 --numeric-owner \
      --mode='u=rwX,go=rX' -cf "$OUT/image/layer-$name-$arch.tar" "$entry" LICENSE
    quiet "$PPT_BIN/crane" append --oci-empty-base -f "$OUT/image/layer-$name-$arch.tar" -t "$repo/$name:layer-$arch"
    quiet "$PPT_BIN/crane" mutate "$repo/$name:layer-$arch" --entrypoint "/$entry" --user 65532 --set-platform "$p" \
      --label "org.opencontainers.image.source=$source_url" --label "org.opencontainers.image.licenses=$license" \
      -t "$repo/$name:runtime-$arch"
    quiet "$PPT_BIN/crane" pull "$repo/$name:runtime-$arch" "$OUT/image/runtime-$name-$arch.tar"
    pkg=$OUT/$name-linux-$arch.xpkg
    "$PPT_BIN/crossplane" xpkg build --package-root="$root" ${examples:+--examples-root="$examples"} \
      ${ignore:+--ignore="$ignore"} \
      --embed-runtime-image-tarball="$OUT/image/runtime-$name-$arch.tar" -o "$pkg"
    built+=("$pkg")
    log "built $pkg ($(du -h "$pkg" | cut -f1), $((SECONDS - t0)) s)"
    if [ "$p" = "$host" ]; then
      cp "$pkg" "$OUT/$name.xpkg"
      log "this machine's platform ($host): $OUT/$name.xpkg"
    fi
  done
  [ -f "$OUT/$name.xpkg" ] || log "PLATFORMS ($PLATFORMS) lacks this machine's platform ($host): no $OUT/$name.xpkg"
  if [ ${#built[@]} -gt 1 ]; then
    files=$(IFS=,; echo "${built[*]}")
    quiet "$PPT_BIN/crossplane" xpkg push -f "$files" "$repo/$name:v0.0.0-index"
    quiet "$PPT_BIN/crane" pull --format=oci "$repo/$name:v0.0.0-index" "$OUT/$name.oci"
    log "built $OUT/$name.oci: an OCI image layout with the index of $PLATFORMS ($(du -sh "$OUT/$name.oci" | cut -f1))"
  fi
}

# The provider: package/ without the Configuration, the function and the
# RBAC that goes with the Configuration, none of which is part of it.
build_packages "$NAME" provider cmd/provider package 'configuration/*,configuration/*/*,function/*,function/*/*,rbac/*' "$OUT/examples-provider"
# The Tenant composition function: package/function (its metadata and the
# schema of its input).
build_packages function-postgresql-tenant function cmd/function package/function "" ""

"$PPT_BIN/crossplane" xpkg build --package-root=package/configuration --examples-root="$OUT/examples-configuration" \
  -o "$OUT/configuration-postgresql-tenant.xpkg"
log "built $OUT/configuration-postgresql-tenant.xpkg ($(du -h "$OUT/configuration-postgresql-tenant.xpkg" | cut -f1))"
