# Shared settings for hack/ scripts. Source it; do not run it.
# Everything built from the Go module proxy is cached outside the repository,
# keyed by version, so a clean clone reuses it and a cold machine rebuilds it.
PPT_CACHE=${PPT_CACHE:-$HOME/.cache/provider-postgresql-tenant}
PPT_BIN=${PPT_BIN:-$PPT_CACHE/bin}
export PPT_CACHE PPT_BIN GOWORK=off
