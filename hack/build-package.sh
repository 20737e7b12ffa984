#!/usr/bin/env bash
# build-package.sh - builds the provider's Crossplane package without Docker:
#   1. the provider binary (static, linux/amd64);
#   2. a runtime image tarball: one layer with /provider on an empty OCI base,
#      entrypoint /provider, user 65532 (crane, through a throw-away local
#      registry on loopback, because `crane mutate` needs a registry);
#   3. `crossplane xpkg build` of package/ with the provider's examples and
#      that image embedded -> _output/provider-postgresql-tenant.xpkg;
#   4. `crossplane xpkg build` of the Configuration (package/configuration:
#      the Tenant XRDs and Compositions, depending on the two functions) with
#      the Tenant examples -> _output/configuration-postgresql-tenant.xpkg.
# cluster/images/provider/Dockerfile is the same image for people with Docker.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
OUT=${OUTPUT:-_output}
for b in crossplane crane; do
  [ -x "$PPT_BIN/$b" ] || { echo "$PPT_BIN/$b not found: run hack/install-tools.sh $b" >&2; exit 1; }
done
rm -rf "$OUT/image" && mkdir -p "$OUT/image"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$OUT/image/provider" ./cmd/provider
tar -C "$OUT/image" --owner=65532 --group=65532 --mode=0755 -cf "$OUT/layer.tar" provider

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 45731)
"$PPT_BIN/crane" registry serve --address "127.0.0.1:$port" > "$OUT/registry.log" 2>&1 &
reg=$!
trap 'kill $reg 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
ref=127.0.0.1:$port/provider-postgresql-tenant
"$PPT_BIN/crane" append --oci-empty-base -f "$OUT/layer.tar" -t "$ref:layer" >/dev/null
"$PPT_BIN/crane" mutate "$ref:layer" --entrypoint /provider --user 65532 --set-platform linux/amd64 -t "$ref:runtime" >/dev/null
rm -f "$OUT/provider-image.tar"
"$PPT_BIN/crane" pull "$ref:runtime" "$OUT/provider-image.tar"

# Examples of each package: the provider's (a config, a Database, an
# ExternalSecret for it) and the Configuration's (a Tenant and what it needs
# in the app namespace; not the generated copies of the package itself).
rm -rf "$OUT/examples-provider" "$OUT/examples-configuration"
mkdir -p "$OUT/examples-provider" "$OUT/examples-configuration/tenant"
cp -r examples/provider examples/database "$OUT/examples-provider/"
cp examples/tenant/*.yaml "$OUT/examples-configuration/tenant/"

rm -f "$OUT/provider-postgresql-tenant.xpkg" "$OUT/configuration-postgresql-tenant.xpkg"
# package/configuration/ is the Configuration package and package/rbac/ the
# RBAC that goes with it: neither is part of the provider package.
"$PPT_BIN/crossplane" xpkg build --package-root=package --examples-root="$OUT/examples-provider" \
  --ignore='configuration/*,configuration/*/*,rbac/*' \
  --embed-runtime-image-tarball="$OUT/provider-image.tar" -o "$OUT/provider-postgresql-tenant.xpkg"
log "built $OUT/provider-postgresql-tenant.xpkg ($(du -h "$OUT/provider-postgresql-tenant.xpkg" | cut -f1))"
"$PPT_BIN/crossplane" xpkg build --package-root=package/configuration --examples-root="$OUT/examples-configuration" \
  -o "$OUT/configuration-postgresql-tenant.xpkg"
log "built $OUT/configuration-postgresql-tenant.xpkg ($(du -h "$OUT/configuration-postgresql-tenant.xpkg" | cut -f1))"
