package testenv

import (
	"testing"

	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FreePort asks the kernel for a TCP port free on every address.
func FreePort() (int, error) {
	// The wildcard address: a port free on loopback can be another
	// address's (the node's, where the kubelet, core and the Pods hold
	// connections), and OpenBao and the node's servers listen on all of them.
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp4", "0.0.0.0:0")
	if err != nil {
		return 0, err
	}
	defer l.Close() //nolint:errcheck // only used to pick a port
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RandomSecret returns a random hex string, usable as a password or token.
func RandomSecret(prefix string) string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return prefix + hex.EncodeToString(b)
}

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// process is a long-running child process whose output goes to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func startProcess(name, logFile string, cmd *exec.Cmd) (*process, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // a log in the harness's own directory
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close() //nolint:errcheck // already failing
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close() //nolint:errcheck // best effort
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig, waits up to 20 s, then kills.
func (p *process) stop(sig os.Signal) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Tail returns the last lines of a log file, for error messages. Component
// logs never hold credentials: no statement logging, no token output.
func Tail(file string, lines int) string {
	b, err := os.ReadFile(file) //nolint:gosec // a log of the harness's own processes
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// LogBuffer collects log output written from several goroutines, for tests
// that grep it (for canaries, or for what happened).
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Await polls obj from the API server until cond holds or timeout passes,
// then fails the test with what it waited for and describe(obj).
func Await[T client.Object](t testing.TB, c client.Client, obj T, timeout time.Duration, what string, cond func(T) bool, describe func(T) string) {
	t.Helper()
	err := WaitFor(context.Background(), timeout, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if !cond(obj) {
			return ErrNotYet
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v; %s", what, err, describe(obj))
	}
}

// Terminate ends a process a test started: SIGTERM, then SIGKILL when it has
// not exited (exited is closed at its exit) within grace; it returns once
// the process has exited.
func Terminate[T any](proc *os.Process, exited <-chan T, grace time.Duration) {
	_ = proc.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = proc.Kill()
		<-exited
	}
}
