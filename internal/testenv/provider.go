package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// BuildProvider builds the provider binary of this tree into dir.
func BuildProvider(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "provider")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/provider") //nolint:gosec // the go command on this repository, into the caller's directory
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/provider: %w\n%s", err, out)
	}
	return bin, nil
}

// ProviderOptions says how to run the provider process.
type ProviderOptions struct {
	// Bin is the provider binary (BuildProvider).
	Bin string
	// Kubeconfig is the identity the provider runs as. Empty: the provider
	// revision's service account when Crossplane installed the provider
	// package (what a cluster would run it as), else the harness's admin.
	Kubeconfig string
	// LogFile gets its output (appended). Empty: provider.log in the run's
	// directory.
	LogFile string
	// Poll is --poll (default 2s).
	Poll time.Duration
	// Pprof serves pprof on a free loopback port.
	Pprof bool
	// LeaderElection keeps the provider's default leader election. Off by
	// default: exactly one provider process runs at a time here, and tests
	// SIGKILL it after writes; a killed leader keeps its Lease for the lease
	// duration (60 s), which every restart would wait out. Leader election
	// itself is tested in cmd/provider.
	LeaderElection bool
	// Args are more flags; Env more environment variables.
	Args, Env []string
}

// Provider is the provider binary running as its own process, as in a
// cluster, with the flags a DeploymentRuntimeConfig would give it pointed at
// the environment's servers.
type Provider struct {
	// Metrics and Pprof are the loopback addresses it serves them on.
	Metrics, Pprof string
	LogFile        string
	// Kubeconfig is the identity it runs as.
	Kubeconfig string

	opts ProviderOptions
	env  *Env
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProvider starts the provider: the one place tests, benchmarks and
// `make dev` start it.
func StartProvider(ctx context.Context, e *Env, o ProviderOptions) (*Provider, error) {
	if o.Kubeconfig == "" {
		o.Kubeconfig = e.Kube.KubeconfigFile
		if e.Crossplane != nil && e.Crossplane.ProviderKubeconfig != "" {
			o.Kubeconfig = e.Crossplane.ProviderKubeconfig
		}
	}
	if o.LogFile == "" {
		o.LogFile = filepath.Join(e.Dir, "provider.log")
	}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
	token, err := e.ProviderTokenFile(ctx)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	p := &Provider{Metrics: "127.0.0.1:" + strconv.Itoa(port), LogFile: o.LogFile, Kubeconfig: o.Kubeconfig, opts: o, env: e, done: make(chan struct{})}
	args := []string{
		"--kubeconfig=" + o.Kubeconfig,
		"--namespace=" + ProviderNamespace,
		"--metrics-bind-address=" + p.Metrics,
		"--health-probe-bind-address=127.0.0.1:0",
		"--openbao-address=" + e.OpenBao.Address,
		"--openbao-auth-role=" + e.OpenBao.ProviderRole,
		"--openbao-sa-token-file=" + token,
		"--ca-bundle=" + e.CA.CertFile,
		"--poll=" + o.Poll.String(),
	}
	if !o.LeaderElection {
		args = append(args, "--leader-election=false")
	}
	if o.Pprof {
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		p.Pprof = "127.0.0.1:" + strconv.Itoa(pp)
		args = append(args, "--pprof-bind-address="+p.Pprof)
	}
	args = append(args, o.Args...)
	f, err := os.OpenFile(o.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(o.Bin, args...) //nolint:gosec,noctx // the provider built from this tree; runs until Stop or a test kills it
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); _ = f.Close(); close(p.done) }()
	if e.Crossplane != nil && e.Crossplane.ProviderRevision != "" {
		if err := e.Crossplane.MarkProviderHealthy(ctx, e.Kube); err != nil {
			p.Stop()
			return nil, err
		}
	}
	return p, nil
}

// Restart stops the provider and starts it again with the same options,
// and env as its extra environment.
func (p *Provider) Restart(ctx context.Context, env ...string) error {
	p.Stop()
	o := p.opts
	o.Env = env
	np, err := StartProvider(ctx, p.env, o)
	if err != nil {
		return err
	}
	*p = *np
	return nil
}

// Running reports whether the process is still up.
func (p *Provider) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited returns an error once the process has ended.
func (p *Provider) Exited() error {
	if p.Running() {
		return nil
	}
	return fmt.Errorf("the provider exited: %v (log: %s)", p.cmd.ProcessState, p.LogFile)
}

// Pid is the process's id.
func (p *Provider) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process ends.
func (p *Provider) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM, then SIGKILL after 20 s, and waits.
func (p *Provider) Stop() {
	if p == nil || p.cmd == nil {
		return
	}
	Terminate(p.cmd.Process, p.done, 20*time.Second)
}

// WaitKilled waits for the process to end by SIGKILL (a fault step).
func (p *Provider) WaitKilled(ctx context.Context) error {
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

// Scrape reads the provider's metrics endpoint.
func (p *Provider) Scrape(ctx context.Context) (string, error) {
	return scrape(ctx, p.Metrics)
}

// scrape GETs /metrics at addr (host:port) over plain HTTP.
func scrape(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
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
