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
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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
	bin := filepath.Join(e.Dir, "provider")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/provider")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/provider: %v\n%s", err, out)
	}
	if err := tenantkit.Platform(ctx, e); err != nil {
		return nil, err
	}
	var err error
	if prov, err = startProvider(ctx, e, bin); err != nil {
		return nil, err
	}
	return func() { prov.stop() }, nil
}

// provider is the provider binary running as its own process, as in a
// cluster, logging to provider.log in the run's directory.
type provider struct {
	bin, logFile, metrics string
	env                   *testenv.Env
	cmd                   *exec.Cmd
	done                  chan struct{}
}

func startProvider(ctx context.Context, e *testenv.Env, bin string, extraEnv ...string) (*provider, error) {
	token, err := e.ProviderTokenFile(ctx)
	if err != nil {
		return nil, err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	p := &provider{bin: bin, env: e, logFile: filepath.Join(e.Dir, "provider.log"), metrics: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	f, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin,
		"--kubeconfig="+e.Kube.KubeconfigFile,
		"--namespace="+testenv.ProviderNamespace,
		"--metrics-bind-address="+p.metrics,
		"--health-probe-bind-address=127.0.0.1:0",
		"--openbao-address="+e.OpenBao.Address,
		"--openbao-auth-role="+e.OpenBao.ProviderRole,
		"--openbao-sa-token-file="+token,
		"--ca-bundle="+e.CA.CertFile,
		"--poll=2s",
		// Exactly one provider process runs at a time here, and the tests
		// SIGKILL it after each write: a killed leader keeps its Lease for
		// the lease duration (60 s), which every restart would wait out.
		// Leader election itself is tested in cmd/provider.
		"--leader-election=false",
	)
	p.cmd.Env = append(os.Environ(), extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

// restart stops the provider and starts it again with extraEnv.
func (p *provider) restart(ctx context.Context, t testing.TB, extraEnv ...string) {
	t.Helper()
	p.stop()
	np, err := startProvider(ctx, p.env, p.bin, extraEnv...)
	if err != nil {
		t.Fatal(err)
	}
	*p = *np
}

// running reports whether the process is still up.
func (p *provider) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits.
func (p *provider) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	testenv.Terminate(p.cmd.Process, p.done, 20*time.Second)
}

// waitExit waits for the process to end on its own (a fault kill).
func (p *provider) waitExit(ctx context.Context) error {
	select {
	case <-p.done:
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil
		}
		return fmt.Errorf("the provider exited, but not by SIGKILL: %v", p.cmd.ProcessState)
	case <-ctx.Done():
		return errors.New("the provider was never killed: the fault step was not reached")
	}
}

// scrape reads the provider's metrics endpoint.
func (p *provider) scrape(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
