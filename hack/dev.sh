#!/usr/bin/env bash
# dev.sh up|down|status - the local development environment of `make dev`.
# up:   installs what is missing, starts hack/devenv in the background
#       (kube-apiserver + etcd, PostgreSQL with TLS, OpenBao, ESO, Crossplane
#       core and its functions, the provider, the examples), waits until the
#       example Database and Tenant are Ready and prints how to use it.
# down: stops it; nothing it started keeps running.
# shell: a shell in the environment's network namespace (the pod runtime).
# The provider runs as users run it, the Pod Crossplane core makes from the
# package on a local node, where the machine allows it: as root, with
# unshare, nsenter and ip. Elsewhere it runs as a local process, and up
# says so. DEV_RUNTIME=pod|process chooses.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
STATE=${DEV_STATE:-$PWD/_output/dev}
PIDFILE=$STATE/devenv.pid

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# stop_on_failure (an EXIT trap of up) stops the environment up started
# when up fails after starting it.
stop_on_failure() {
  local rc=$?
  if [ "$rc" -ne 0 ] && running; then
    echo "make dev failed (exit $rc); stopping the environment it started (log: $STATE/devenv.log)." >&2
    down >&2
  fi
}

up() {
  if running; then
    echo "The dev environment is already running (pid $(cat "$PIDFILE")); 'make dev-down' stops it."
    print_usage; return 0
  fi
  hack/install.sh dev
  mkdir -p "$STATE"
  rm -f "$STATE/ready"
  go build -o "$STATE/devenv" ./hack/devenv
  local runtime=${DEV_RUNTIME:-}
  if [ -z "$runtime" ]; then
    if [ "$(id -u)" = 0 ] && command -v unshare nsenter ip > /dev/null; then
      runtime=pod
    else
      runtime=process
      echo "make dev: the provider runs as a local process, not as the Pod Crossplane makes: a local node needs root and unshare, nsenter, ip (util-linux, iproute2)."
    fi
  fi
  # The log is created (and a previous run's emptied) here, before the
  # background job exists: the job's own redirection runs only once it has
  # been scheduled, and reading the log before then found no file (a fresh
  # clone) or the previous run's lines. The job appends to it.
  : > "$STATE/devenv.log"
  # From here on a failure of this script (not of devenv, reported below)
  # must not leave the environment running unannounced: stop it.
  trap stop_on_failure EXIT
  setsid "$STATE/devenv" -state "$STATE" -runtime "$runtime" >> "$STATE/devenv.log" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  local shown=0 t0=$SECONDS
  while [ ! -f "$STATE/ready" ]; do
    if ! running; then
      sed -n "$((shown + 1)),\$p" "$STATE/devenv.log"
      echo "The dev environment failed to start (log: $STATE/devenv.log)." >&2
      rm -f "$PIDFILE"; return 1
    fi
    local n; n=$(wc -l < "$STATE/devenv.log")
    if [ "$n" -gt "$shown" ]; then sed -n "$((shown + 1)),${n}p" "$STATE/devenv.log"; shown=$n; fi
    if [ $((SECONDS - t0)) -gt 600 ]; then echo "Timed out after 10 minutes (log: $STATE/devenv.log)." >&2; down; return 1; fi
    sleep 1
  done
  sed -n "$((shown + 1)),\$p" "$STATE/devenv.log"
  trap - EXIT
  echo "Up in $((SECONDS - t0))s."
  print_usage
  show_trace
}

# The last Tenant's tree as Crossplane's CLI shows it, and the Database it
# binds (the binding names the Database; it does not compose it, so the
# Tenant's tree stops at the binding).
show_trace() {
  local st=$STATE/state.json tns tn rel
  val() { sed -n "s/.*\"$1\": \"\{0,1\}\([^\",]*\).*/\1/p" "$st"; }
  tns=$(val tenantNamespace) tn=$(val tenant) rel=$(val released)
  echo
  echo "  crossplane resource trace tenant.database.ayatori.ddupan.top/$tn -n $tns"
  in_env "$PPT_BIN/crossplane" resource trace "tenant.database.ayatori.ddupan.top/$tn" -n "$tns" | sed 's/^/    /' || true
  echo "  crossplane resource trace database.database.ayatori.ddupan.top/$rel"
  in_env "$PPT_BIN/crossplane" resource trace "database.database.ayatori.ddupan.top/$rel" | sed 's/^/    /' || true
}

# netns is the network namespace the environment listens in (the pod
# runtime), else empty.
netns() { sed -n 's/.*"netns": "\([^"]*\)".*/\1/p' "$STATE/state.json" 2>/dev/null; }

# in_env runs a command where the environment is reachable, with its
# kubeconfig.
in_env() {
  local ns; ns=$(netns)
  if [ -n "$ns" ]; then
    KUBECONFIG=$STATE/kubeconfig nsenter --net="$ns" -- "$@"
  else
    KUBECONFIG=$STATE/kubeconfig "$@"
  fi
}

shell() {
  running || { echo "The dev environment is not running: make dev starts it." >&2; exit 1; }
  local ns; ns=$(netns)
  [ -n "$ns" ] || { echo "The dev environment runs on this machine's network (the provider as a process): no namespace to enter." >&2; exit 1; }
  echo "A shell in the dev environment's network namespace (KUBECONFIG and PATH set; exit leaves it)." >&2
  KUBECONFIG=$STATE/kubeconfig PATH=$PPT_BIN:$PATH exec nsenter --net="$ns" -- "${SHELL:-bash}"
}

print_usage() {
  local kc=$STATE/kubeconfig st=$STATE/state.json
  local bao db sns stn ssec rel tns tn tsec xlog logs
  val() { sed -n "s/.*\"$1\": \"\{0,1\}\([^\",]*\).*/\1/p" "$st"; }
  bao=$(val openBaoAddress) db=$(val database)
  sns=$(val staticNamespace) stn=$(val staticTenant) ssec=$(val staticSecret)
  rel=$(val released) tns=$(val tenantNamespace) tn=$(val tenant) tsec=$(val tenantSecret)
  xlog=$(val crossplaneLog) logs=$(val logsDir)
  local ns where provlog
  ns=$(netns)
  if [ -n "$ns" ]; then
    where="
  The provider runs as the Pod Crossplane core made from its package, under
  examples/provider/runtime-config.yaml, on a local node; everything listens in a
  private network namespace. Run what follows in it:
  hack/dev.sh shell                  # or: nsenter --net=$ns -- <command>"
    provlog="provider: kubectl logs -n crossplane-system -l pkg.crossplane.io/provider=ddupan-provider-postgresql-tenant
        (the kubelet's files: $(val providerLog)/)"
  else
    where="
  The provider runs as a local process (make dev runs it as the Pod Crossplane makes
  only as root)."
    provlog="provider $(val providerLog)"
  fi
  cat <<EOT

Local control plane, Crossplane, PostgreSQL, OpenBao, ESO and the provider are running.
$where

  export KUBECONFIG=$kc
  export PATH=$PPT_BIN:\$PATH        # kubectl $K8S_VERSION built by hack/install-k8s.sh
  kubectl get pgserver
  kubectl get databases.database.ayatori.ddupan.top               # cluster-scoped: BINDING, CLAIM, RECLAIM at a glance

  What happened:
  - the admin's Database $db (examples/database) was reserved for tenant $sns/$stn,
    which bound it (static) and got the Secret $ssec;
  - tenant wiki/wiki got a new Database (dynamic), was deleted, and its Database
    $rel stayed, Released, with its data;
  - the admin reserved $rel for tenant $tns/$tn, which bound it and got the
    Secret $tsec (the owner: for migrations) and, for its data roles,
    $tsec-app (readWrite: what the app runs with) and $tsec-report (readOnly).
  kubectl get tenants.database.ayatori.ddupan.top,databasebindings.database.ayatori.ddupan.top,externalsecrets -A
  $PPT_BIN/crossplane resource trace tenant.database.ayatori.ddupan.top/$tn -n $tns   # the Tenant's tree
  kubectl describe secret -n $tns $tsec      # its keys, no values
  Log in with nothing but the Secret (and the local CA):
  PGPASSWORD=\$(kubectl get secret -n $tns $tsec -o jsonpath='{.data.password}' | base64 -d) \\
    psql "\$(kubectl get secret -n $tns $tsec -o go-template='host={{.data.host|base64decode}} hostaddr={{.data.hostaddr|base64decode}} port={{.data.port|base64decode}} dbname={{.data.database|base64decode}} user={{.data.username|base64decode}} sslmode={{.data.sslmode|base64decode}}') sslrootcert=$STATE/ca.crt"

  The records (a throw-away local OpenBao; its root token is in a 0600 file): the
  Database's own, and the copy the namespace reads:
  BAO_ADDR=$bao BAO_CACERT=$STATE/ca.crt BAO_TOKEN=\$(cat $STATE/openbao-root-token) \\
    $PPT_BIN/bao kv metadata get kv/postgresql-databases/$rel
  BAO_ADDR=$bao BAO_CACERT=$STATE/ca.crt BAO_TOKEN=\$(cat $STATE/openbao-root-token) \\
    $PPT_BIN/bao kv metadata get kv/postgresql-tenants/$tns/$tn

  Logs: $provlog
        Crossplane core $xlog
        (ESO, functions, OpenBao, PostgreSQL: $logs/)

Stop everything with: make dev-down
EOT
}

down() {
  if running; then
    local pid; pid=$(cat "$PIDFILE")
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL -- -"$pid" 2>/dev/null || kill -KILL "$pid"; fi
    echo "Stopped the dev environment (pid $pid)."
  else
    echo "The dev environment is not running."
  fi
  # Anything left in its process group (it was started with setsid) goes too.
  if [ -f "$PIDFILE" ]; then kill -KILL -- -"$(cat "$PIDFILE")" 2>/dev/null || true; fi
  rm -f "$PIDFILE" "$STATE/ready"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) if running; then print_usage; else echo "not running"; exit 1; fi ;;
  shell) shell ;;
  *) echo "usage: $0 up|down|status|shell" >&2; exit 2 ;;
esac
