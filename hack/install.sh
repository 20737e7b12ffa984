#!/usr/bin/env bash
# install.sh [SET] - installs, idempotently, every real component a set needs,
# building the slow ones in parallel.
#   test (default)  what CI uses: etcd, kube-apiserver, ESO, OpenBao, PostgreSQL,
#                   and the Crossplane CLI and crane for the package build
#   dev             what `make dev` uses: the test set and kubectl
#   all             also kube-controller-manager, kubectl, ESO, the Crossplane
#                   CLI and core, the composition functions and crane
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
set_=${1:-test}
case "$set_" in
  test) k8s=(etcd kube-apiserver); eso=(external-secrets); tools=(bao crossplane crane) ;;
  dev)  k8s=(etcd kube-apiserver kubectl); eso=(external-secrets); tools=(bao) ;;
  all)  k8s=(etcd kube-apiserver kube-controller-manager kubectl); eso=(external-secrets)
        tools=(bao crossplane crossplane-core function-patch-and-transform function-auto-ready crane) ;;
  *) echo "usage: $0 [test|dev|all]" >&2; exit 2 ;;
esac
mkdir -p "$PPT_CACHE/logs"
t0=$SECONDS
hack/install-postgres.sh
# Three build queues: the Kubernetes binaries, ESO, and the rest (a cold
# build is CPU-bound; the queues keep both cores busy until the end).
hack/install-k8s.sh "${k8s[@]}" > "$PPT_CACHE/logs/install-k8s-$set_.log" 2>&1 & k8s_pid=$!
hack/install-k8s.sh "${eso[@]}" > "$PPT_CACHE/logs/install-eso-$set_.log" 2>&1 & eso_pid=$!
hack/install-tools.sh "${tools[@]}" > "$PPT_CACHE/logs/install-tools-$set_.log" 2>&1 & tools_pid=$!
rc=0
for q in k8s:$k8s_pid eso:$eso_pid tools:$tools_pid; do
  name=${q%%:*} pid=${q##*:} f=$PPT_CACHE/logs/install-${q%%:*}-$set_.log
  wait "$pid" || { echo "install ($name) failed; last lines of $f:" >&2; tail -n 30 "$f" >&2; rc=1; }
done
grep -h '^\[' "$PPT_CACHE"/logs/install-{k8s,eso,tools}-"$set_".log >&2 || true
log "component set '$set_' ready in $PPT_BIN after $((SECONDS - t0))s"
exit $rc
