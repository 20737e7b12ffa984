// Command provider runs provider-postgresql-tenant: the controllers that
// register shared PostgreSQL servers and provision tenant databases whose
// credentials live only in OpenBao.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientrest "k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"ddupan.top/provider-postgresql-tenant/apis"
	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	pctrl "ddupan.top/provider-postgresql-tenant/internal/controller"
	"ddupan.top/provider-postgresql-tenant/internal/controller/pace"
	pmetrics "ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "provider-postgresql-tenant:", err)
		os.Exit(1)
	}
}

// leaderElectionID names the Lease, in --namespace, that the replicas
// compete for.
const leaderElectionID = "crossplane-leader-election-provider-postgresql-tenant"

type flags struct {
	debug, leaderElection       bool
	sync, poll, pollStateMetric time.Duration
	maxReconcileRate            int
	maxConcurrent               int
	maxPoolConns                int
	connectTimeout              time.Duration
	metricsAddr, healthAddr     string
	pprofAddr                   string
	enableChangeLogs            bool
	changeLogsSocket            string
	opts                        options.Options
}

func parse(args []string) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	// --kubeconfig, for running out of cluster; ctrl.GetConfig reads it.
	fs.String("kubeconfig", "", "Path to a kubeconfig. Only required out of cluster.")

	fs.BoolVar(&f.debug, "debug", false, "Run with debug logging.")
	fs.BoolVar(&f.leaderElection, "leader-election", true, "Elect one leader among the provider's replicas (a Lease in --namespace); only the leader reconciles. Turn off only where a single process is guaranteed.")
	fs.DurationVar(&f.sync, "sync", time.Hour, "How often all resources are re-listed from the API server.")
	fs.DurationVar(&f.poll, "poll", time.Minute, "How often each resource is checked for drift from its desired state.")
	fs.DurationVar(&f.pollStateMetric, "poll-state-metric", 5*time.Second, "How often the managed resource state metrics are recorded.")
	fs.IntVar(&f.maxReconcileRate, "max-reconcile-rate", 10, "The global rate per second at which resources may be reconciled. Raised automatically to 1.5 × resources ÷ --poll when there are more resources than it can observe once per poll interval (the provider_postgresql_tenant_reconcile_rate_limit metric shows the rate in effect).")
	fs.IntVar(&f.maxConcurrent, "max-concurrent-reconciles", 0, "Reconciles run at once per controller (default: --max-reconcile-rate). Lower it to spare a small PostgreSQL server during bulk onboarding.")
	fs.IntVar(&f.maxPoolConns, "max-pool-conns", int(postgres.DefaultOptions.MaxConns), "Maximum admin connections per registered PostgreSQL server.")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", postgres.DefaultOptions.ConnectTimeout, "Timeout for opening one PostgreSQL connection, TLS included.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to (0 disables it).")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address Go's /debug/pprof endpoints bind to, for profiling (empty: off). Bind it to localhost and port-forward: it is unauthenticated.")

	fs.BoolVar(&f.enableChangeLogs, "enable-changelogs", false, "Send an entry for every create, update and delete of a Database or DatabaseBinding to Crossplane's change logs sidecar (alpha; see docs/operations.md). Each entry waits up to 10 s for the sidecar.")
	fs.StringVar(&f.changeLogsSocket, "changelogs-socket", pctrl.DefaultChangeLogsSocket, "Unix socket of the change logs sidecar (with --enable-changelogs).")

	o := &f.opts
	fs.DurationVar(&o.MinPollInterval, "min-poll-interval", options.DefaultMinPollInterval, "The shortest poll interval a resource may ask for with the crossplane.io/poll-interval annotation; shorter values are raised to it.")
	fs.StringVar(&o.Namespace, "namespace", options.DefaultNamespaceFromEnv(), "The provider's own namespace (default $POD_NAMESPACE); ClusterProviderConfig admin Secrets must live here.")
	fs.DurationVar(&o.SizeRefreshInterval, "size-refresh-interval", 5*time.Minute, "How often, at most, the sizes of one ClusterProviderConfig's databases are measured (one pg_database_size statement over them all) for the Databases' and the config's status.")
	fs.DurationVar(&o.LoginCheckInterval, "login-check-interval", options.DefaultLoginCheckInterval, "How often a Ready Database reads its credential record from OpenBao and proves it by logging in as its role while nothing the catalog shows has changed (a dropped role or database, revoked CONNECT, changed attributes or expiry, and, where the admin may read pg_authid, a changed password are seen at every poll and make it read and log in at once; a record edited or deleted by hand is noticed at this check). A bound Tenant's delivery copy is read on the same schedule, and whenever the Database's proven record version moves. 0 reads the records and logs in at every poll.")
	fs.StringVar(&o.CABundle, "ca-bundle", "", "PEM file of CAs trusted for PostgreSQL and OpenBao TLS.")
	fs.StringVar(&o.OpenBao.Address, "openbao-address", "", "OpenBao address the provider uses, e.g. https://openbao.openbao.svc:8200 (https:// only, see --openbao-allow-insecure-http). No BAO_*/VAULT_* environment variable changes it or its TLS.")
	fs.BoolVar(&o.OpenBao.AllowInsecureHTTP, "openbao-allow-insecure-http", false, "LOCAL DEVELOPMENT ONLY: accept http:// OpenBao addresses (the OpenBao token and tenant credentials then cross the network in clear).")
	fs.StringVar(&o.OpenBao.ConsumerAddress, "openbao-consumer-address", "", "OpenBao address consumers use, shown in status (default: --openbao-address).")
	fs.StringVar(&o.OpenBao.AuthMount, "openbao-auth-mount", options.DefaultAuthMount, "Mount of OpenBao's Kubernetes auth method.")
	fs.StringVar(&o.OpenBao.AuthRole, "openbao-auth-role", "", "OpenBao Kubernetes auth role of the provider.")
	fs.StringVar(&o.OpenBao.KVMount, "openbao-kv-mount", options.DefaultKVMount, "KV v2 mount holding tenant credentials (a dev server uses 'secret').")
	fs.StringVar(&o.OpenBao.DatabaseBasePath, "openbao-database-base-path", options.DefaultDatabaseBasePath, "Path under the KV mount below which each Database's own credential record lives, as <base>/<database-name> (read and written by the provider only).")
	fs.StringVar(&o.OpenBao.TenantBasePath, "openbao-tenant-base-path", options.DefaultTenantBasePath, "Path under the KV mount below which a bound Database's credential is copied for its Tenant's namespace, as <base>/<namespace>/<tenant-name>.")
	fs.StringVar(&o.OpenBao.ServiceAccountTokenFile, "openbao-sa-token-file", options.DefaultSATokenFile, "Projected service-account token used for OpenBao Kubernetes auth, re-read at every login. Its audience must be the OpenBao role's (e.g. \""+options.DefaultOpenBaoAudience+"\"), not the kube-apiserver's; the default is where examples/provider/runtime-config.yaml mounts such a token.")
	fs.StringVar(&o.OpenBao.TokenFile, "openbao-token-file", "", "LOCAL DEVELOPMENT ONLY: read an OpenBao token from this file instead of Kubernetes auth.")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if kc := fs.Lookup("kubeconfig").Value.String(); kc != "" {
		// ctrl.GetConfig honours $KUBECONFIG; the flag wins over it.
		if err := os.Setenv("KUBECONFIG", kc); err != nil {
			return nil, err
		}
	}
	if f.maxReconcileRate < 1 {
		return nil, fmt.Errorf("--max-reconcile-rate must be at least 1")
	}
	if f.maxConcurrent == 0 {
		f.maxConcurrent = f.maxReconcileRate
	}
	if f.maxConcurrent < 1 {
		return nil, fmt.Errorf("--max-concurrent-reconciles must be at least 1")
	}
	if f.maxPoolConns < 1 || f.maxPoolConns > 1000 {
		return nil, fmt.Errorf("--max-pool-conns must be between 1 and 1000")
	}
	if f.enableChangeLogs && !filepath.IsAbs(f.changeLogsSocket) {
		return nil, fmt.Errorf("--changelogs-socket must be an absolute path")
	}
	if f.connectTimeout <= 0 {
		return nil, fmt.Errorf("--connect-timeout must be positive")
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

func run(args []string) error {
	f, err := parse(args)
	if err != nil {
		return err
	}

	zl := zap.New(zap.UseDevMode(f.debug))
	log := logging.NewLogrLogger(zl.WithName("provider-postgresql-tenant"))
	if f.debug {
		ctrl.SetLogger(zl)
	} else {
		// controller-runtime is very verbose at info level.
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	if f.opts.OpenBao.TokenFile != "" {
		log.Info("Using an OpenBao token file instead of Kubernetes auth: for local development only")
	}
	if f.opts.OpenBao.AllowInsecureHTTP {
		log.Info("http:// OpenBao addresses are allowed (--openbao-allow-insecure-http): for local development only")
	}
	if !f.leaderElection {
		log.Info("Leader election is off: run exactly one provider process")
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("cannot get the API server configuration: %w", err)
	}

	// The leader renews its Lease every retryPeriod (controller-runtime's
	// default, 2 s, is 30 writes a minute: a third of an idle fleet's
	// apiserver requests); a waiting replica tries as often, so a stopped
	// leader's successor takes over within retryPeriod.
	leaseDuration, renewDeadline, retryPeriod := 60*time.Second, 50*time.Second, 10*time.Second
	// One limiter for every apiserver request the provider sends, sized as
	// crossplane-runtime sizes the client for the flag; the pace scaler
	// raises it with the reconcile rate.
	rest := pace.NewRESTLimiter(f.maxReconcileRate)
	limited := clientrest.CopyConfig(cfg)
	limited.RateLimiter = rest
	mgr, err := ctrl.NewManager(limited, ctrl.Options{
		Cache: cache.Options{
			SyncPeriod: &f.sync,
			// Nothing in the provider reads managedFields, and they are a
			// large part of each cached Database and usage record: at
			// 10,000 Databases they are tens of MiB of RSS. An update from
			// a cached copy omits them, which keeps them on the server.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                    metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:     f.healthAddr,
		PprofBindAddress:           f.pprofAddr,
		LeaderElection:             f.leaderElection,
		LeaderElectionID:           leaderElectionID,
		LeaderElectionNamespace:    f.opts.Namespace,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &leaseDuration,
		RenewDeadline:              &renewDeadline,
		RetryPeriod:                &retryPeriod,
		// Hand the Lease over at once on SIGTERM (a rolling update), instead
		// of making the next leader wait out LeaseDuration. Safe: run returns
		// right after the manager stops, and the process ends.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("cannot create the controller manager: %w", err)
	}
	if err := apis.AddToScheme(mgr.GetScheme()); err != nil {
		return fmt.Errorf("cannot add the provider's APIs to the scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(mgr.GetScheme()); err != nil {
		return fmt.Errorf("cannot add CustomResourceDefinitions to the scheme: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready means the caches have synced: until then the reconcilers
	// would decide from an empty cache, and the Pod is held out of Ready
	// (and Crossplane's Provider out of Healthy).
	if err := mgr.AddReadyzCheck("caches-synced", cachesSynced(mgr.GetCache())); err != nil {
		return err
	}

	// The provider's state gauges (configs Ready, resources not Ready by
	// reason, Released Databases), counted from the cache as often as
	// Crossplane's managed-resource state metrics.
	if err := mgr.Add(&pmetrics.StateRecorder{Cache: mgr.GetCache(), Interval: f.pollStateMetric, State: pmetrics.StateGauges}); err != nil {
		return err
	}
	mrMetrics := managed.NewMRMetricRecorder()
	stateMetrics := statemetrics.NewMRStateMetrics()
	metrics.Registry.MustRegister(mrMetrics, stateMetrics)

	// The global rate limit is --max-reconcile-rate, raised as the number
	// of resources needs to observe each once per poll interval.
	globalRate := ratelimiter.NewGlobal(f.maxReconcileRate)
	// A Database or DatabaseBinding added to the cache (a creation, or the
	// initial list) wakes the scaler, so a wave of new resources raises the
	// rate within a second instead of at the next recount.
	wake := make(chan struct{}, 1)
	for _, obj := range []client.Object{&v1alpha1.Database{}, &v1alpha1.DatabaseBinding{}} {
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return fmt.Errorf("cannot watch %T for the pace: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) {
			select {
			case wake <- struct{}{}:
			default:
			}
		}}); err != nil {
			return fmt.Errorf("cannot watch %T for the pace: %w", obj, err)
		}
	}
	if err := mgr.Add(&pace.Scaler{
		Limiter: globalRate.Limiter, REST: rest.L, Min: f.maxReconcileRate, Poll: f.poll,
		Every: 30 * time.Second, Busy: time.Second, Wake: wake,
		Count: polledResources(mgr.GetCache(), time.Now), Log: log.WithValues("controller", "pace"),
	}); err != nil {
		return err
	}
	o := controller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: f.maxConcurrent,
		PollInterval:            f.poll,
		GlobalRateLimiter:       globalRate,
		Features:                &feature.Flags{},
		Gate:                    new(gate.Gate[schema.GroupVersionKind]),
		MetricOptions: &controller.MetricOptions{
			PollStateMetricInterval: f.pollStateMetric,
			MRMetrics:               mrMetrics,
			MRStateMetrics:          stateMetrics,
		},
	}
	// Always on: a Database's default policies (no Delete) only mean
	// something when management policies are honoured.
	o.Features.Enable(feature.EnableBetaManagementPolicies)

	if err := customresourcesgate.Setup(mgr, o); err != nil {
		return fmt.Errorf("cannot set up the CRD gate: %w", err)
	}
	pools := postgres.NewManager(postgres.Options{
		MaxConns:       int32(f.maxPoolConns), //nolint:gosec // bounded above
		ConnectTimeout: f.connectTimeout,
		CallTimeout:    postgres.DefaultOptions.CallTimeout,
		CABundleFile:   f.opts.CABundle,
	})
	defer pools.Close()
	kv, err := openbao.New(openbao.Options{
		Address:                 f.opts.OpenBao.Address,
		AllowInsecureHTTP:       f.opts.OpenBao.AllowInsecureHTTP,
		CABundleFile:            f.opts.CABundle,
		AuthMount:               f.opts.OpenBao.AuthMount,
		AuthRole:                f.opts.OpenBao.AuthRole,
		ServiceAccountTokenFile: f.opts.OpenBao.ServiceAccountTokenFile,
		TokenFile:               f.opts.OpenBao.TokenFile,
		KVMount:                 f.opts.OpenBao.KVMount,
	})
	if err != nil {
		return fmt.Errorf("cannot configure the OpenBao client: %w", err)
	}
	if f.enableChangeLogs {
		clo, closeChangeLogs, err := pctrl.ChangeLogs(f.changeLogsSocket, pctrl.ProviderVersion())
		if err != nil {
			return err
		}
		defer closeChangeLogs() //nolint:errcheck // the process ends
		o.ChangeLogOptions = clo
		log.Info("Change logs are on", "socket", f.changeLogsSocket)
	}
	if err := pctrl.SetupGated(mgr, o, f.opts, pools, kv, faultHook(log)); err != nil {
		return fmt.Errorf("cannot set up the controllers: %w", err)
	}
	log.Info("Starting", "namespace", f.opts.Namespace, "poll", f.poll.String(), "maxReconcileRate", f.maxReconcileRate, "maxConcurrentReconciles", f.maxConcurrent, "leaderElection", f.leaderElection)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// faultKillEnv names a Database or binding write step before which the process kills
// itself with SIGKILL (or, as PID 1 of a container, exits as if killed): fault injection for the end-to-end tests, which
// restart the provider without it and expect the same end state. Unset in
// any real deployment; when set, the provider says so loudly at start.
const faultKillEnv = "PPT_FAULT_KILL_BEFORE_STEP"

func faultHook(log logging.Logger) func(string) error {
	step := os.Getenv(faultKillEnv)
	if step == "" {
		return nil
	}
	log.Info("FAULT INJECTION ENABLED (tests only): the process kills itself before this write step", "env", faultKillEnv, "step", step)
	return func(s string) error {
		if s == step {
			// The kernel drops a SIGKILL that PID 1 of a PID namespace
			// (the provider in its container) sends itself: there the
			// process ends at once instead, running nothing on the way
			// out, with the status of a SIGKILL (128+9), which the
			// kubelet reports as the container's exit code.
			if os.Getpid() == 1 {
				syscall.Exit(128 + int(syscall.SIGKILL))
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not deliverable late; never continue the step
		}
		return nil
	}
}

// polledResources counts the Databases and DatabaseBindings in the cache,
// and those of them arriving (new and not Ready yet).
func polledResources(c client.Reader, now func() time.Time) func(context.Context) (pace.Load, error) {
	return func(ctx context.Context) (pace.Load, error) {
		dbs, bs := &v1alpha1.DatabaseList{}, &v1alpha1.DatabaseBindingList{}
		if err := c.List(ctx, dbs, client.UnsafeDisableDeepCopy); err != nil {
			return pace.Load{}, err
		}
		if err := c.List(ctx, bs, client.UnsafeDisableDeepCopy); err != nil {
			return pace.Load{}, err
		}
		t := now()
		l := pace.Load{Resources: len(dbs.Items) + len(bs.Items)}
		for i := range dbs.Items {
			if arriving(&dbs.Items[i], t) {
				l.Arriving++
			}
		}
		for i := range bs.Items {
			if arriving(&bs.Items[i], t) {
				l.Arriving++
			}
		}
		return l, nil
	}
}

func arriving(o interface {
	GetCreationTimestamp() metav1.Time
	GetCondition(xpv2.ConditionType) xpv2.Condition
}, now time.Time) bool {
	return pace.Arriving(o.GetCreationTimestamp().Time, o.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, now)
}

// cachesSynced is the readiness check: ready once every informer the
// provider has started has synced (a list and watch the apiserver
// answered); it waits at most a second per probe.
func cachesSynced(c interface{ WaitForCacheSync(context.Context) bool }) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the provider's caches have not synced: it cannot read its resources from the API server yet")
		}
		return nil
	}
}
