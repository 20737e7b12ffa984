#!/usr/bin/env bash
# install-prometheus.sh - installs, idempotently, Prometheus and promtool for
# test/monitoring (the shipped alerts and dashboard of cluster/monitoring):
# Debian's prometheus package with apt-get, as root or through sudo; skipped
# when both binaries are on PATH. The package's service is not wanted: where
# systemd started it, it is stopped and disabled (the tests start their own
# Prometheus on a free loopback port).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  log "prometheus present ($(prometheus --version 2>&1 | awk 'NR==1{print $3}'))"
  exit 0
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
command -v apt-get >/dev/null || { log "prometheus and promtool are missing and there is no apt-get: install Prometheus 2.x so that both are on PATH"; exit 1; }
log "installing prometheus with apt-get"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  "${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
log "installed prometheus $(prometheus --version 2>&1 | awk 'NR==1{print $3}')"
