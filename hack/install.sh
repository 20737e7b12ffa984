#!/usr/bin/env bash
# install.sh [SET] - installs, idempotently, every real component a set needs,
# building the slow ones in parallel.
#   test (default)  what CI uses: etcd, kube-apiserver, kube-controller-manager
#                   (garbage collector), ESO, OpenBao, PostgreSQL, Crossplane
#                   core, the Crossplane CLI, the test node of test/pod
#                   (kubelet, kube-scheduler, kube-proxy built after the
#                   control plane, which they share most of their build
#                   with; containerd, runc, the CNI plugins and nftables
#                   from Debian, hack/install-node.sh)
#                   and crane for the package build, and what `make lint`
#                   needs: golangci-lint and ShellCheck (hack/install-lint.sh),
#                   and Prometheus with promtool for test/monitoring
#                   (hack/install-prometheus.sh, Debian's package), and
#                   mermaid's parser for the docs' diagrams (test/docs,
#                   hack/install-mermaid.sh, from npm)
#   dev             what `make dev` uses: the test set and kubectl
#   all             the same as dev
# Every set: PostgreSQL of the default major ($PG_MAJOR), of each of
# $PG_MAJORS (the matrix `make test` runs; unset: every supported major) and
# of the oldest supported major (the old server of the migration drill).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
set_=${1:-test}
# Three build queues of roughly equal cold build time (a cold build is
# CPU-bound; the queues keep both cores busy until the end).
k8s=(etcd kube-apiserver kube-controller-manager kubelet kube-scheduler kube-proxy)
eso=(external-secrets); eso_tools=(crossplane-core)
tools=(bao crossplane crane)
case "$set_" in
  test) k8s+=(kubectl) ;;
  dev|all) k8s+=(kubectl) ;;
  *) echo "usage: $0 [test|dev|all]" >&2; exit 2 ;;
esac
mkdir -p "$PPT_CACHE/logs"
t0=$SECONDS
# shellcheck disable=SC2086 # word lists
hack/install-postgres.sh $PG_MAJOR ${PG_MAJORS-$PG_SUPPORTED_MAJORS} ${PG_SUPPORTED_MAJORS%% *}
hack/install-k8s.sh "${k8s[@]}" > "$PPT_CACHE/logs/install-k8s-$set_.log" 2>&1 & k8s_pid=$!
{ hack/install-k8s.sh "${eso[@]}" && hack/install-tools.sh "${eso_tools[@]}"; } > "$PPT_CACHE/logs/install-eso-$set_.log" 2>&1 & eso_pid=$!
{ hack/install-tools.sh "${tools[@]}" && hack/install-lint.sh && hack/install-prometheus.sh && hack/install-mermaid.sh && hack/install-node.sh; } > "$PPT_CACHE/logs/install-tools-$set_.log" 2>&1 & tools_pid=$!
# Progress every 30 s while anything builds: for each queue, the component
# it is building, for how long, and how long its last build took (from
# $PPT_CACHE/logs/build-seconds/, recorded by each build), or its last
# line; the time so far and the last full build's time; the logs.
estimate=$PPT_CACHE/logs/build-seconds-$set_
progress() {
  # Never ends the loop: a queue's log with no line yet, or a date it
  # cannot read, is shown as it is (set -e and pipefail would end it).
  set +e +o pipefail
  local last="" q f step at
  [ -s "$estimate" ] && last=" (the last build of this set took $(cat "$estimate")s)"
  while sleep 30; do
    log "building for $((SECONDS - t0))s$last; logs: $PPT_CACHE/logs/install-{k8s,eso,tools}-$set_.log"
    for q in k8s eso tools; do
      f=$PPT_CACHE/logs/install-$q-$set_.log
      step=$(grep -h '^\[' "$f" 2>/dev/null | tail -n 1)
      if [[ $step =~ ^\[[^\ ]+\ ([0-9:]+)\]\ building\ ([^ ]+)\ (.*)$ ]] && at=$(date -d "${BASH_REMATCH[1]}" +%s 2>/dev/null); then
        step="building ${BASH_REMATCH[2]} for $(( $(date +%s) - at ))s ${BASH_REMATCH[3]}"
      fi
      log "  $q: ${step:-starting}"
    done
  done
}
progress & progress_pid=$!
rc=0
for q in k8s:$k8s_pid eso:$eso_pid tools:$tools_pid; do
  name=${q%%:*} pid=${q##*:} f=$PPT_CACHE/logs/install-${q%%:*}-$set_.log
  wait "$pid" || { echo "install ($name) failed; last lines of $f:" >&2; tail -n 30 "$f" >&2; rc=1; }
done
kill "$progress_pid" 2>/dev/null || true
grep -h '^\[' "$PPT_CACHE"/logs/install-{k8s,eso,tools}-"$set_".log >&2 || true
# A run that built something records its time as the next run's estimate.
if [ "$rc" = 0 ] && [ $((SECONDS - t0)) -gt 120 ]; then echo "$((SECONDS - t0))" > "$estimate"; fi
log "component set '$set_' ready in $PPT_BIN after $((SECONDS - t0))s"
exit $rc
