// Package e2e is the acceptance suite (docs/acceptance.md): the whole product on the
// real local control plane — kube-apiserver + etcd, kube-controller-manager
// (garbage collector, namespace deletion), PostgreSQL with TLS, OpenBao with
// Kubernetes auth, the real ESO controller, Crossplane core with the
// Configuration package's XRDs, Compositions and functions, and the provider
// binary as a separate process that the tests stop, kill and restart.
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
	// prov is the running provider process.
	prov *provider
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Kube: true, Postgres: true, OpenBao: true, ESO: true, Crossplane: true}, &env, setup)
}

func setup(e *testenv.Env) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := testenv.BuildProvider(ctx, e.Dir)
	if err != nil {
		return nil, err
	}
	if err := tenantkit.Platform(ctx, e); err != nil {
		return nil, err
	}
	// The provider runs as the service account Crossplane's RBAC manager
	// bound its generated ClusterRole to, plus what the docs tell an admin
	// to grant: a permission missing there fails these tests.
	p, err := testenv.StartProvider(ctx, e, testenv.ProviderOptions{Bin: bin})
	if err != nil {
		return nil, err
	}
	prov = &provider{p}
	return func() { prov.Stop() }, nil
}

// provider is the provider process (testenv.StartProvider) with the
// helpers the tests call it through.
type provider struct{ *testenv.Provider }

// restart stops the provider and starts it again with extraEnv.
func (p *provider) restart(ctx context.Context, t testing.TB, extraEnv ...string) {
	t.Helper()
	if err := p.Restart(ctx, extraEnv...); err != nil {
		t.Fatal(err)
	}
}

func (p *provider) running() bool                              { return p.Running() }
func (p *provider) stop()                                      { p.Stop() }
func (p *provider) waitExit(ctx context.Context) error         { return p.WaitKilled(ctx) }
func (p *provider) scrape(ctx context.Context) (string, error) { return p.Scrape(ctx) }
