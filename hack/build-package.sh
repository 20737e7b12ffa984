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
#     the Tenant XRDs and Compositions, depending on the provider and the two
#     functions) with the Tenant examples
#     -> _output/configuration-postgresql-tenant.xpkg.
# cluster/images/provider/Dockerfile is the same image for people with Docker.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
OUT=${OUTPUT:-_output}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
NAME=provider-postgresql-tenant
for b in crossplane crane; do
  [ -x "$PPT_BIN/$b" ] || { echo "$PPT_BIN/$b not found: run make tools (or hack/install-tools.sh $b)" >&2; exit 1; }
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
rm -rf "$OUT/image" "$OUT/$NAME.oci" "$OUT/layer.tar" "$OUT/provider-image.tar"
rm -f "$OUT/$NAME.xpkg" "$OUT/$NAME"-linux-*.xpkg "$OUT/configuration-postgresql-tenant.xpkg"

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
repo=127.0.0.1:$port/$NAME
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

built=()
for p in "${platforms[@]}"; do
  arch=${p#linux/} t0=$SECONDS
  dir=$OUT/image/$arch
  mkdir -p "$dir"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags='-s -w' -o "$dir/provider" ./cmd/provider
  cp LICENSE "$dir/LICENSE"
  chmod 0755 "$dir/provider" && chmod 0644 "$dir/LICENSE"
  tar -C "$dir" --sort=name --mtime=@0 --owner=65532 --group=65532 --numeric-owner \
    --mode='u=rwX,go=rX' -cf "$OUT/image/layer-$arch.tar" provider LICENSE
  quiet "$PPT_BIN/crane" append --oci-empty-base -f "$OUT/image/layer-$arch.tar" -t "$repo:layer-$arch"
  quiet "$PPT_BIN/crane" mutate "$repo:layer-$arch" --entrypoint /provider --user 65532 --set-platform "$p" \
    --label "org.opencontainers.image.source=$source_url" --label "org.opencontainers.image.licenses=$license" \
    -t "$repo:runtime-$arch"
  quiet "$PPT_BIN/crane" pull "$repo:runtime-$arch" "$OUT/image/runtime-$arch.tar"
  # package/configuration/ is the Configuration package and package/rbac/
  # the RBAC that goes with it: neither is part of the provider package.
  pkg=$OUT/$NAME-linux-$arch.xpkg
  "$PPT_BIN/crossplane" xpkg build --package-root=package --examples-root="$OUT/examples-provider" \
    --ignore='configuration/*,configuration/*/*,rbac/*' \
    --embed-runtime-image-tarball="$OUT/image/runtime-$arch.tar" -o "$pkg"
  built+=("$pkg")
  log "built $pkg ($(du -h "$pkg" | cut -f1), $((SECONDS - t0)) s)"
  if [ "$p" = "$host" ]; then
    cp "$pkg" "$OUT/$NAME.xpkg"
    log "this machine's platform ($host): $OUT/$NAME.xpkg"
  fi
done
[ -f "$OUT/$NAME.xpkg" ] || log "PLATFORMS ($PLATFORMS) lacks this machine's platform ($host): no $OUT/$NAME.xpkg"

if [ ${#built[@]} -gt 1 ]; then
  files=$(IFS=,; echo "${built[*]}")
  quiet "$PPT_BIN/crossplane" xpkg push -f "$files" "$repo:v0.0.0-index"
  quiet "$PPT_BIN/crane" pull --format=oci "$repo:v0.0.0-index" "$OUT/$NAME.oci"
  log "built $OUT/$NAME.oci: an OCI image layout with the index of $PLATFORMS ($(du -sh "$OUT/$NAME.oci" | cut -f1))"
fi

"$PPT_BIN/crossplane" xpkg build --package-root=package/configuration --examples-root="$OUT/examples-configuration" \
  -o "$OUT/configuration-postgresql-tenant.xpkg"
log "built $OUT/configuration-postgresql-tenant.xpkg ($(du -h "$OUT/configuration-postgresql-tenant.xpkg" | cut -f1))"
