package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ESO is the real External Secrets Operator controller, started as a process
// against the test apiserver (its CRDs are installed with the project's).
type ESO struct {
	// MetricsAddr is the controller's metrics endpoint (host:port).
	MetricsAddr string

	logFile string
	proc    *process
	bin     string
	args    []string
	env     []string
}

// ESOCRDDir is where hack/install-k8s.sh puts the ESO CRDs.
func ESOCRDDir(binDir string) string { return filepath.Join(binDir, "eso-crds") }

func startESO(_ context.Context, root, binDir string, k *Kube, extra []string) (*ESO, error) {
	bin := filepath.Join(binDir, "external-secrets")
	if _, err := os.Stat(bin); err != nil {
		return nil, missing("External Secrets Operator", bin, "hack/install-k8s.sh external-secrets (make tools)")
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	e := &ESO{
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", port),
		logFile:     filepath.Join(root, "eso.log"), bin: bin,
		args: []string{fmt.Sprintf("--metrics-addr=127.0.0.1:%d", port), "--concurrent=4", "--store-requeue-interval=10s"},
		// ESO has no --kubeconfig flag; it reads $KUBECONFIG.
		env: append(os.Environ(), "KUBECONFIG="+k.KubeconfigFile),
	}
	e.args = append(e.args, extra...)
	return e, e.Start()
}

// Start starts the controller (again, after Stop).
func (e *ESO) Start() error {
	cmd := exec.Command(e.bin, e.args...) //nolint:gosec,noctx // the pinned binary from the component cache; runs until Stop
	cmd.Env = e.env
	var err error
	if e.proc, err = startProcess("external-secrets", e.logFile, cmd); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	if e.proc.exited() {
		return errors.New("external-secrets exited at once:\n" + Tail(e.logFile, 20))
	}
	return nil
}

// Stop stops the controller.
func (e *ESO) Stop() {
	if e != nil && e.proc != nil {
		e.proc.stop(syscall.SIGTERM)
	}
}

// LogFile is the controller's log.
func (e *ESO) LogFile() string { return e.logFile }
