// Package testenv starts the real components the tests run against, once per
// test package: a PostgreSQL server with TLS, an OpenBao server with a KV v2
// mount and Kubernetes auth, a kube-apiserver with etcd and the project's
// CRDs, and optionally ESO and Crossplane with the project's packages
// installed through its package manager. Nothing is mocked. A missing
// component fails the test run with the command that installs it; nothing
// is skipped, except under -short, where no component starts and the tests
// that need one skip (Need).
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Options selects the components to start.
type Options struct {
	Postgres bool
	OpenBao  bool
	Kube     bool
	// ESO starts the External Secrets Operator (needs Kube; installs its
	// CRDs) and, with OpenBao, the tenant-reader role ESO logs in with.
	ESO bool
	// ESOCRDs installs ESO's CRDs without running ESO (needs Kube): for
	// tests of what reads ExternalSecrets.
	ESOCRDs bool
	// Crossplane starts Crossplane core (needs Kube), the Configuration's
	// functions and the garbage collector, and installs package/configuration.
	Crossplane bool
	// OpenBaoAudit gives OpenBao a file audit device (OpenBao.AuditLog):
	// one line per request and per response, secrets HMAC'd, for tests
	// that count what a client asks of OpenBao.
	OpenBaoAudit bool
	// KubeAudit gives kube-apiserver an audit log at the Metadata level
	// (Kube.AuditLog): one JSON line per request, with its verb, resource,
	// user and user agent and no object, for benchmarks that count
	// requests by client. It costs the apiserver a write per request.
	KubeAudit bool
	// ESOArgs are more flags for the External Secrets Operator, after the
	// harness's own (a repeated flag takes the last value).
	ESOArgs []string
	// ExtraCRDDirs are installed next to package/crds.
	ExtraCRDDirs []string
	// TenantCRDs installs the CRDs of the Tenant kinds made from the XRDs
	// (ConvertXRDs; needs Kube, not with Crossplane, which installs them
	// from the Configuration): the provider's controllers read the Tenant
	// a DatabaseBinding belongs to. Nothing composes a Tenant then.
	TenantCRDs bool
	// Node runs a Kubernetes node (Node: containerd, a kubelet,
	// kube-scheduler, kube-controller-manager, kube-proxy) against the
	// apiserver, so that Deployments become real Pods; with Crossplane,
	// core then runs its default (Deployment) package runtime and the
	// provider package's image runs as a Pod (the Configuration and its
	// functions only with NodeConfiguration). Needs Kube, and the package's TestMain
	// to be NodeMain: the whole environment runs in a private network
	// namespace, where the apiserver, OpenBao and PostgreSQL also listen on
	// NodeIP for the pods.
	Node bool
	// NodeConfiguration, with Node and Crossplane, installs the
	// Configuration package too, after the provider: core's Deployment
	// runtime runs its function (the package's embedded image) as a Pod,
	// which core reaches by its Service's name through the node's DNS.
	NodeConfiguration bool
	// NodeUpgradeFrom, with Node and Crossplane, installs the packages
	// built from this earlier commit of the repository (PackagesDirAt,
	// as PackageTestVersion) instead of the tree's: the starting point of
	// an upgrade, which the test makes by publishing the tree's packages
	// under a later version (Crossplane.PublishPackages) and editing the
	// package objects. The RBAC manager keeps running, to bind the roles
	// of each new revision.
	NodeUpgradeFrom string
	// InstallDrill, with Node, Crossplane, OpenBao and ESO, leaves the
	// environment as a platform admin finds a cluster before installing
	// the product, for a drill that installs it from the docs alone:
	// Crossplane core running (with its RBAC manager) and nothing
	// installed; OpenBao initialised and unsealed with nothing enabled
	// (no KV mount, no auth method, no policy); ESO running with its CRDs
	// and no store; PostgreSQL with its superuser. The packages are built
	// (Env.PackagesDir) and the loopback registry is empty
	// (Crossplane.RegistryAddress); the node pulls from it.
	InstallDrill bool
	// NodeProvider, with Node and Crossplane, changes the runtime config
	// of examples/provider/runtime-config.yaml before the provider is
	// installed with it (ProviderPodOptions): for suites that drive the
	// provider's Pod with ProviderPodControl. The Deployment's strategy can
	// only be chosen then: core applies its Deployment server-side, and a
	// later Recreate is refused next to the rollingUpdate the apiserver
	// defaulted.
	NodeProvider *ProviderPodOptions
}

// All starts every component.
var All = Options{Postgres: true, OpenBao: true, Kube: true}

// Env is a running test environment.
type Env struct {
	// Dir holds every file of the run: certificates, data, logs.
	Dir string
	// BinDir holds the binaries built by hack/install-*.sh.
	BinDir string
	// CA signed the PostgreSQL and OpenBao server certificates.
	CA *CA
	// OtherCA signed nothing the servers present: a bundle of it alone must
	// fail verification.
	OtherCA *CA

	Postgres   *Postgres
	OpenBao    *OpenBao
	Kube       *Kube
	ESO        *ESO
	Crossplane *Crossplane
	Node       *Node
	// PackagesDir holds the packages built from the tree (PackagesDir),
	// with Crossplane.
	PackagesDir string
}

// CacheDir returns where hack/install-*.sh cache the components:
// $PPT_CACHE, else ~/.cache/provider-postgresql-tenant.
func CacheDir() string {
	if d := os.Getenv("PPT_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "provider-postgresql-tenant")
}

// BinDir returns where hack/install-*.sh put the binaries built from the Go
// module proxy: $PPT_BIN, else $PPT_CACHE/bin.
func BinDir() string {
	if d := os.Getenv("PPT_BIN"); d != "" {
		return d
	}
	return filepath.Join(CacheDir(), "bin")
}

// ErrMissing is returned when a component's binary is not installed.
type ErrMissing struct {
	What, Path, Install string
	// Override names the setting that points at another copy (default
	// PPT_BIN).
	Override string
}

func (e *ErrMissing) Error() string {
	o := e.Override
	if o == "" {
		o = "PPT_BIN"
	}
	return fmt.Sprintf("%s not found at %s: install it with `%s` (or set %s)", e.What, e.Path, e.Install, o)
}

func missing(what, path, install string) error {
	return &ErrMissing{What: what, Path: path, Install: install}
}

// Start starts the selected components. Stop the Env when done, even after
// an error (Start stops what it started when it fails).
func Start(ctx context.Context, o Options) (*Env, error) {
	dir, err := os.MkdirTemp("", "ppt-env-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, BinDir: BinDir()}
	fail := func(err error) (*Env, error) { e.Stop(); return nil, err }
	if o.Node && (!o.Kube || !InNodeNetns()) {
		return fail(errors.New("Options.Node needs Kube and the package's TestMain to be testenv.NodeMain"))
	}
	if e.CA, err = newCA(dir, "test-ca"); err != nil {
		return fail(err)
	}
	if e.OtherCA, err = newCA(dir, "other-ca"); err != nil {
		return fail(err)
	}
	// With Crossplane, the provider's CRDs come from its package, installed
	// through core's package manager; the package is built meanwhile.
	type built struct {
		dir string
		err error
	}
	packages := make(chan built, 1)
	if o.Crossplane {
		go func() { d, err := PackagesDir(ctx); packages <- built{d, err} }()
	}
	if o.Kube {
		crds := append([]string{}, o.ExtraCRDDirs...)
		if !o.Crossplane {
			crds = append(crds, filepath.Join(RepoRoot(), "package", "crds"))
		}
		if o.TenantCRDs && !o.Crossplane {
			d := filepath.Join(dir, "tenant-crds")
			if err := os.MkdirAll(d, 0o700); err != nil {
				return fail(err)
			}
			if err := ConvertXRDs(d); err != nil {
				return fail(err)
			}
			crds = append(crds, d)
		}
		if o.ESO || o.ESOCRDs {
			d := ESOCRDDir(e.BinDir)
			if _, err := os.Stat(d); err != nil {
				return fail(missing("ESO CRDs", d, "hack/install-k8s.sh external-secrets (make tools)"))
			}
			crds = append(crds, d)
		}
		if o.Crossplane {
			d := CrossplaneCRDDir(e.BinDir)
			if _, err := os.Stat(d); err != nil {
				return fail(missing("Crossplane core CRDs", d, "hack/install-tools.sh crossplane-core (make tools)"))
			}
			crds = append(crds, d)
		}
		var nodeCA *CA
		if o.Node {
			nodeCA = e.CA
		}
		if e.Kube, err = startKube(ctx, dir, e.BinDir, crds, o.KubeAudit, nodeCA); err != nil {
			return fail(err)
		}
	}
	if o.Node {
		if e.Node, err = startNode(ctx, dir, e.BinDir, e.Kube, e.CA); err != nil {
			return fail(err)
		}
	}
	if o.Postgres {
		if e.Postgres, err = startPostgres(ctx, dir, e.CA, "", o.Node); err != nil {
			return fail(err)
		}
	}
	if o.OpenBao {
		if e.OpenBao, err = startOpenBao(ctx, dir, e.BinDir, e.CA, o.OpenBaoAudit, o.Node, !o.InstallDrill); err != nil {
			return fail(err)
		}
		if e.Kube != nil && o.InstallDrill && o.Node {
			if err := e.OpenBao.exposeOnNode(ctx, e.Kube); err != nil {
				return fail(err)
			}
		} else if e.Kube != nil {
			if err := e.OpenBao.configureKubernetesAuth(ctx, e.Kube); err != nil {
				return fail(err)
			}
			if o.ESO {
				if err := e.OpenBao.configureTenantReader(ctx); err != nil {
					return fail(err)
				}
			}
			if o.Node {
				if err := e.OpenBao.exposeOnNode(ctx, e.Kube); err != nil {
					return fail(err)
				}
			}
		}
	}
	if o.ESO {
		if e.ESO, err = startESO(ctx, dir, e.BinDir, e.Kube, o.ESOArgs); err != nil {
			return fail(err)
		}
	}
	if o.Crossplane {
		if e.Crossplane, err = startCrossplane(ctx, dir, e.BinDir, e.Kube, e.CA, o.Node, o.InstallDrill); err != nil {
			return fail(err)
		}
		e.Crossplane.providerPod = o.NodeProvider
		if o.Node {
			// The node pulls from the loopback registry; outside a drill,
			// the packages' public host is mirrored there too (the images
			// of packages installed under their public names).
			var mirror []string
			if !o.InstallDrill {
				mirror = []string{hostOf(ProviderPackageName)}
			}
			if err := e.Node.AllowRegistry(e.Crossplane.reg.addr, mirror...); err != nil {
				return fail(err)
			}
		}
		b := <-packages
		if b.err != nil {
			return fail(b.err)
		}
		e.PackagesDir = b.dir
		switch {
		case o.Node && o.InstallDrill:
			// Nothing is installed: the drill does it.
			e.Crossplane.keepRBACManager = true
		case o.Node && o.NodeUpgradeFrom != "":
			// The RBAC manager stops once the earlier packages are
			// installed; the drill starts it again around each change of
			// revisions (StartRBACManager).
			var old string
			if old, err = PackagesDirAt(ctx, o.NodeUpgradeFrom); err == nil {
				err = e.Crossplane.InstallProviderPod(ctx, old, e, o.NodeConfiguration)
			}
		case o.Node:
			err = e.Crossplane.InstallProviderPod(ctx, b.dir, e, o.NodeConfiguration)
		default:
			err = e.Crossplane.InstallPackages(ctx, dir, e.BinDir, b.dir, e.Kube)
		}
		if err != nil {
			return fail(err)
		}
	}
	return e, nil
}

// Stop stops every component and removes the run's files, unless
// PPT_KEEP_TESTENV is set (then it says where they are).
func (e *Env) Stop() {
	if e == nil {
		return
	}
	e.Crossplane.Stop()
	e.ESO.Stop()
	if e.OpenBao != nil {
		e.OpenBao.Stop()
	}
	if e.Postgres != nil {
		e.Postgres.Stop()
	}
	e.Node.Stop()
	e.Kube.Stop()
	if os.Getenv("PPT_KEEP_TESTENV") != "" {
		fmt.Fprintf(os.Stderr, "testenv: kept %s\n", e.Dir)
		return
	}
	_ = os.RemoveAll(e.Dir)
}

// StartPostgres starts one more PostgreSQL server (TLS, the same CA, its
// own superuser and admin role) in its own directory: e.g. the old server of
// a migration drill. The caller stops it.
func (e *Env) StartPostgres(ctx context.Context, name string) (*Postgres, error) {
	return e.StartPostgresMajor(ctx, name, "")
}

// StartPostgresMajor is StartPostgres with the server of another supported
// PostgreSQL major, from the component cache ("" is the suite's).
func (e *Env) StartPostgresMajor(ctx context.Context, name, major string) (*Postgres, error) {
	root := filepath.Join(e.Dir, name)
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, err
	}
	return startPostgres(ctx, root, e.CA, major, e.Node != nil)
}

// Main is a TestMain body: it starts the components, runs each hook (which
// may start more, e.g. controllers, and returns how to stop them), runs the
// package's tests, stops everything and exits. A component that cannot
// start fails the whole package with the reason (and the install command
// when a binary is missing).
//
// With -short it starts nothing, runs no hook and leaves *env nil: only the
// tests that need no component run; the others skip themselves (Need).
func Main(m *testing.M, o Options, env **Env, hooks ...func(*Env) (func(), error)) {
	if short() {
		os.Exit(m.Run())
	}
	// Where a package's time goes besides its tests: starting, hooks,
	// stopping (on stderr, beside the tests' own times under -v).
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	e, err := Start(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: test environment: %v\n", err)
		os.Exit(1)
	}
	*env = e
	fmt.Fprintf(os.Stderr, "testenv: environment started in %s\n", time.Since(t0).Round(100*time.Millisecond))
	listenToVersionPoints()
	t0 = time.Now()
	var stops []func()
	for _, h := range hooks {
		stop, err := h(e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: test environment hook: %v\n", err)
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
			e.Stop()
			os.Exit(1)
		}
		stops = append(stops, stop)
	}
	if len(hooks) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: hooks done in %s\n", time.Since(t0).Round(100*time.Millisecond))
	}
	code := m.Run()
	if missed := uncoveredVersionPoints(); code == 0 && len(missed) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: tests marked MajorIndependent reach SQL that differs by PostgreSQL major and that no test run on every major reaches, so the matrix would run it on the default major only: unmark them, or add a test on every major that reaches it:\n  %s\n", strings.Join(missed, "\n  "))
		code = 1
	}
	t0 = time.Now()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	e.Stop()
	fmt.Fprintf(os.Stderr, "testenv: environment stopped in %s\n", time.Since(t0).Round(100*time.Millisecond))
	os.Exit(code)
}

// ProviderTokenFile writes a fresh service-account token of the provider
// with OpenBao's audience (TokenRequest) to a file, as the projected volume
// of examples/provider/runtime-config.yaml would, and returns its path: what
// the provider's OpenBao Kubernetes-auth login reads.
func (e *Env) ProviderTokenFile(ctx context.Context) (string, error) {
	jwt, err := e.Kube.ServiceAccountTokenFor(ctx, ProviderNamespace, ProviderServiceAccount, ProviderAudience)
	if err != nil {
		return "", err
	}
	f := filepath.Join(e.Dir, "provider-sa-token")
	return f, os.WriteFile(f, []byte(jwt), 0o600)
}
