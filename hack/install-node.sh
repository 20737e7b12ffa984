#!/usr/bin/env bash
# install-node.sh - installs, idempotently, the Debian packages of the test
# node (internal/testenv's Node: real Pods under a kubelet, test/pod):
# containerd and runc (the container runtime), containernetworking-plugins
# (the bridge and host-local CNI plugins, in /usr/lib/cni) and nftables
# (kube-proxy's nftables mode calls nft). With apt-get, as root or through
# sudo; skipped when every binary is present. The containerd service the
# package may start is not wanted (the harness starts its own containerd,
# inside the test's private network namespace, with its own state
# directory): where systemd started it, it is stopped and disabled.
# The kubelet, kube-scheduler and kube-proxy are built by hack/install-k8s.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh

present() {
  command -v containerd >/dev/null && command -v ctr >/dev/null && command -v runc >/dev/null &&
    command -v nft >/dev/null && [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ]
}
if present; then
  log "node packages present (containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'))"
  exit 0
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
command -v apt-get >/dev/null || { log "containerd, runc, the CNI plugins or nft are missing and there is no apt-get: install containerd 1.6+, runc, the CNI reference plugins in /usr/lib/cni and nftables"; exit 1; }
log "installing containerd runc containernetworking-plugins nftables with apt-get"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  containerd runc containernetworking-plugins nftables >/dev/null
if command -v systemctl >/dev/null && systemctl is-active --quiet containerd 2>/dev/null; then
  "${sudo[@]}" systemctl disable --now containerd >/dev/null 2>&1 || true
fi
present || { log "installed, but a node binary is still missing"; exit 1; }
log "installed containerd $(containerd --version | awk '{print $3}'), runc, the CNI plugins and nft"
