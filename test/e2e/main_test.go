// Package e2e is the acceptance suite (docs/acceptance.md): the whole product on the
// real local control plane — kube-apiserver + etcd, kube-controller-manager
// (garbage collector, namespace deletion), PostgreSQL with TLS, OpenBao with
// Kubernetes auth, the real ESO controller, Crossplane core with the
// Configuration package's XRDs, Compositions and functions — and a real
// node (kubelet, containerd, kube-proxy) in the test's private network
// namespace (testenv.NodeMain). Core installs the provider package on its
// default (Deployment) package runtime with the runtime config of
// examples/provider/runtime-config.yaml, and the provider runs as the Pod
// core's Deployment makes, as on a user's cluster; the function runs as a
// Pod too. The tests restart, stop and kill the provider by editing that
// runtime config (core rolls the Deployment) and through the node (the
// kubelet restarts a killed container).
// Every test asserts the end state in PostgreSQL, OpenBao and Kubernetes.
package e2e

import (
	"context"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

var (
	env *testenv.Env
	// prov is the provider's Pod.
	prov *provider
)

func TestMain(m *testing.M) {
	testenv.NodeMain(m, testenv.Options{
		Kube: true, Postgres: true, OpenBao: true, ESO: true, Crossplane: true,
		Node: true, NodeConfiguration: true,
		NodeProvider: &testenv.ProviderPodOptions{Args: providerArgs, Recreate: true},
	}, &env, setup)
}

// providerArgs are the flags the suite adds to the runtime config's: a
// poll of 2 s, so that drift is seen within the tests' waits, and no
// leader election, as exactly one provider process runs at a time (the
// Deployment's Recreate strategy) and the tests SIGKILL it after writes: a
// killed leader keeps its Lease for the lease duration (60 s), which every
// restart would wait out. Leader election itself is tested in cmd/provider
// and test/upgrade.
var providerArgs = []string{"--poll=2s", "--leader-election=false"}

func setup(e *testenv.Env) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := tenantkit.Platform(ctx, e); err != nil {
		return nil, err
	}
	// The provider runs as the service account of the runtime config,
	// which Crossplane's RBAC manager bound its generated ClusterRole to,
	// plus what the docs tell an admin to grant: a permission missing
	// there fails these tests.
	p, err := testenv.NewProviderPodControl(ctx, e)
	if err != nil {
		return nil, err
	}
	prov = &provider{p}
	return p.Close, nil
}

// provider is the provider's Pod (testenv.ProviderPodControl) with the
// helpers the tests call it through.
type provider struct{ *testenv.ProviderPodControl }

// restart replaces the provider's Pod by one with extraEnv in its
// container's environment, and waits until it is the only one and Ready.
func (p *provider) restart(ctx context.Context, t testing.TB, extraEnv ...string) {
	t.Helper()
	if err := p.Restart(ctx, extraEnv...); err != nil {
		t.Fatal(err)
	}
}

// running reports whether a provider Pod is Running and Ready.
func (p *provider) running() bool { return p.Running(context.Background()) }

// stop scales the provider's Deployment to zero.
func (p *provider) stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits until the provider's container ended by SIGKILL.
func (p *provider) waitExit(ctx context.Context) error         { return p.WaitKilled(ctx) }
func (p *provider) scrape(ctx context.Context) (string, error) { return p.Scrape(ctx) }
