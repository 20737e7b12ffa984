package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// benchEnv is one fresh set of real components (PostgreSQL with TLS,
// OpenBao with Kubernetes auth, kube-apiserver with the CRDs) for one
// measurement, so no run inherits another's catalog, KV records or objects.
type benchEnv struct {
	*testenv.Env
	// kube is a client without client-go's default 5 QPS limit, so
	// creating N objects measures the provider, not the benchmark.
	kube client.WithWatch
	// super is a superuser session for server settings and catalog
	// counts; it is opened before any measured window and kept.
	super *pgx.Conn
	// tokenFile is the provider's service-account token (for the
	// provider process and for the floor's OpenBao client).
	tokenFile string
	// server is the PostgreSQL server's settings, printed with every run.
	server serverInfo
}

// dbStack is what the Database measurements need; fullStack adds what a
// Tenant needs: ESO, and Crossplane core with the provider and
// Configuration packages installed.
var (
	dbStack   = testenv.Options{Postgres: true, OpenBao: true, Kube: true}
	fullStack = testenv.Options{Postgres: true, OpenBao: true, Kube: true, ESO: true, Crossplane: true}
)

func startEnv(ctx context.Context, o testenv.Options) (*benchEnv, error) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	e, err := testenv.Start(sctx, o)
	if err != nil {
		return nil, err
	}
	b := &benchEnv{Env: e}
	fail := func(err error) (*benchEnv, error) { b.stop(); return nil, err }
	cfg := *e.Kube.Config
	cfg.QPS, cfg.Burst = 1000, 2000
	if b.kube, err = client.NewWithWatch(&cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return fail(err)
	}
	if b.super, err = e.Postgres.SuperConn(sctx, "postgres"); err != nil {
		return fail(err)
	}
	if b.server, err = readServer(sctx, b.super); err != nil {
		return fail(err)
	}
	if o.Crossplane {
		// The provider runs as the service account Crossplane made for it.
		return b, nil
	}
	if b.tokenFile, err = e.ProviderTokenFile(sctx); err != nil {
		return fail(err)
	}
	return b, nil
}

func (b *benchEnv) stop() {
	if b == nil {
		return
	}
	if b.super != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.super.Close(ctx)
		cancel()
	}
	b.Env.Stop()
}

// setServer changes server settings with ALTER SYSTEM and reloads the
// configuration (only settings that take effect on reload).
func (b *benchEnv) setServer(ctx context.Context, settings map[string]string) error {
	for k, v := range settings {
		if _, err := b.super.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", pgx.Identifier{k}.Sanitize(), v)); err != nil {
			return err
		}
	}
	_, err := b.super.Exec(ctx, "SELECT pg_reload_conf()")
	// A reload is asynchronous: give the postmaster and backends a moment.
	time.Sleep(500 * time.Millisecond)
	return err
}

// buildProvider builds cmd/provider once into dir.
func buildProvider(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "provider")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/provider") //nolint:gosec // builds this repository's provider into the run's directory
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/provider: %w\n%s", err, out)
	}
	return bin, nil
}
