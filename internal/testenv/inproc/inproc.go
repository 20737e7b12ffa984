// Package inproc runs the provider's controllers inside a test process,
// against the real components of a testenv.Env, wired as cmd/provider wires
// them.
package inproc

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/binding"
	"ddupan.top/provider-postgresql-tenant/internal/controller/config"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// Options tune the in-process controllers of a test package.
type Options struct {
	// Poll is the Databases' poll interval.
	Poll time.Duration
	// ConfigInterval and ConfigRetry are the config health intervals.
	ConfigInterval, ConfigRetry time.Duration
	// CABundleFile for PostgreSQL (default: the run's CA).
	CABundleFile string
	// StepHook injects faults before Database write steps.
	StepHook func(step string) error
	// PoolHook injects faults at the admin pools' points inside a step
	// (postgres.Options.Hook).
	PoolHook func(point string) error
	// Logs receives every log line (development format).
	Logs io.Writer
	// LoginCheckInterval is the Database controller's periodic login check
	// (0: the provider's default; negative: a login at every poll).
	LoginCheckInterval time.Duration
	// SizeInterval is how often the configs' database sizes are measured
	// (0: the provider's default).
	SizeInterval time.Duration
	// SizeRetryBase is the backoff base of a failed size measurement (0:
	// the provider's).
	SizeRetryBase time.Duration
	// WrapKV, when set, wraps the real OpenBao client the Database
	// controller uses (to count or fail its calls).
	WrapKV func(database.KV) database.KV
	// MinPollInterval is the floor of a crossplane.io/poll-interval
	// annotation (0: none).
	MinPollInterval time.Duration
	// PollObserver is told each Database's poll interval
	// (database.Deps.PollObserver).
	PollObserver func(name string, poll time.Duration)
	// ChangeLogs, when set, receive the Database and binding controllers'
	// change log entries (--enable-changelogs).
	ChangeLogs *controller.ChangeLogOptions
	// Writes, when set, counts the writes the Database and binding
	// controllers send to the API server.
	Writes *Writes
}

// Controllers are the provider's controllers running in this process
// against the Env's real components, as cmd/provider wires them.
type Controllers struct {
	Pools *postgres.Manager
}

// Start runs the config usage and health controllers and the Database
// controller in process and returns how to stop them.
func Start(e *testenv.Env, co Options) (*Controllers, func(), error) {
	ctx := context.Background()
	zl := zap.New(zap.UseDevMode(true), zap.WriteTo(co.Logs))
	ctrl.SetLogger(zl)
	// As the provider's service account when Crossplane installed the
	// provider package (its generated RBAC), else as the harness's admin.
	cfg := e.Kube.Config
	var err error
	if e.Crossplane != nil && e.Crossplane.ProviderKubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", e.Crossplane.ProviderKubeconfig); err != nil {
			return nil, nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, nil, err
	}
	o := controller.Options{
		Logger:                  logging.NewLogrLogger(zl),
		MaxConcurrentReconciles: 4,
		PollInterval:            co.Poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(1000),
		Features:                &feature.Flags{},
		ChangeLogOptions:        co.ChangeLogs,
	}
	o.Features.Enable(feature.EnableBetaManagementPolicies)
	if co.CABundleFile == "" {
		co.CABundleFile = e.CA.CertFile
	}
	pools := postgres.NewManager(postgres.Options{MaxConns: 4, ConnectTimeout: 3 * time.Second, CallTimeout: 10 * time.Second, CABundleFile: co.CABundleFile, Hook: co.PoolHook})
	tf, err := e.ProviderTokenFile(ctx)
	if err != nil {
		return nil, nil, err
	}
	kv, err := openbao.New(openbao.Options{Address: e.OpenBao.Address, CABundleFile: e.CA.CertFile, AuthMount: e.OpenBao.AuthMount, AuthRole: e.OpenBao.ProviderRole, ServiceAccountTokenFile: tf, KVMount: e.OpenBao.KVMount})
	if err != nil {
		return nil, nil, err
	}
	opts := options.Options{Namespace: testenv.ProviderNamespace, CABundle: e.CA.CertFile, OpenBao: options.OpenBao{
		Address: e.OpenBao.Address, ConsumerAddress: e.OpenBao.Address, KVMount: e.OpenBao.KVMount, TenantBasePath: e.OpenBao.TenantBasePath,
		DatabaseBasePath: options.DefaultDatabaseBasePath,
	}, LoginCheckInterval: options.DefaultLoginCheckInterval, MinPollInterval: co.MinPollInterval}
	if co.LoginCheckInterval != 0 {
		opts.LoginCheckInterval = max(co.LoginCheckInterval, 0)
	}
	if err := config.Setup(mgr, o); err != nil {
		return nil, nil, err
	}
	sizes := memo.NewSizes()
	if err := config.SetupStatus(mgr, o, config.StatusOptions{Namespace: opts.Namespace, Pools: pools, Interval: co.ConfigInterval, RetryInterval: co.ConfigRetry, Sizes: sizes, SizeInterval: co.SizeInterval, SizeRetryBase: co.SizeRetryBase}); err != nil {
		return nil, nil, err
	}
	logins := memo.NewLogins()
	var dkv database.KV = kv
	if co.WrapKV != nil {
		dkv = co.WrapKV(kv)
	}
	// The Database and binding controllers write through a client that
	// counts their writes when asked (the status writes a reconcile drops
	// as unchanged are not sent, so not counted).
	cmgr := ctrl.Manager(mgr)
	if co.Writes != nil {
		cmgr = countingManager{Manager: mgr, w: co.Writes}
	}
	if err := database.Setup(cmgr, o, database.Deps{Options: opts, Pools: pools, KV: dkv, StepHook: co.StepHook, Logins: logins, Sizes: sizes, PollObserver: co.PollObserver}); err != nil {
		return nil, nil, err
	}
	if err := binding.Setup(cmgr, o, binding.Deps{Options: opts, KV: kv, Records: logins}); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(cctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return &Controllers{Pools: pools}, func() { cancel(); <-done; pools.Close() }, nil
}
