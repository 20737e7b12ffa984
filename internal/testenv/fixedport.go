package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FixedMetricsPort is the port two kinds of component bind on every
// interface whatever the harness asks, with no flag to change it:
// Crossplane's RBAC manager (controller-runtime's default metrics address;
// it exits when the port is taken) and the composition functions
// (function-sdk-go's default metrics address; they ignore a failure and
// keep running, holding the port for as long as they live when it was
// free).
//
// So environments in one network namespace (the host's, or a node's) share
// it by these rules, all under one lock (fixedPort):
//   - an RBAC manager starts only when the port is free, and the harness
//     waits until the manager itself is listening on it before it goes on;
//   - a function starts only while the port is held (by the environment's
//     own RBAC manager, or by a placeholder listener of the harness), and
//     the lock is kept until the function serves gRPC, after its metrics
//     server has tried the port and failed: no function ever holds it;
//   - the lock is released only after the manager has exited (process.stop
//     waits for it), so the next one finds the port free.
const FixedMetricsPort = 8080

// functionSettle is how long the port stays held after the last function
// started beside a placeholder serves gRPC, before the placeholder goes.
// function-sdk-go starts its metrics server in a goroutine just before it
// serves gRPC, and nothing orders the two: on a loaded machine a function
// can answer before that goroutine has tried the port (CI saw one take the
// port this way). A second is far beyond a runnable goroutine's wait; an
// RBAC manager, the other holder, keeps the port for a whole package
// installation after its functions serve, so it needs no such wait.
const functionSettle = time.Second

// fixedPort is a port some components bind whatever they are told, and
// the lock under which environments share it.
type fixedPort struct {
	port     int
	lockFile string
}

// metricsPort is FixedMetricsPort and its lock in the component cache:
// the host's, or in a node's network namespace (which has a port 8080 of
// its own) that node slot's.
func metricsPort() fixedPort {
	name := "fixed-metrics-port.lock"
	if InNodeNetns() {
		name = "fixed-metrics-port-node-" + os.Getenv(nodeSlotEnv) + ".lock"
	}
	return fixedPort{port: FixedMetricsPort, lockFile: filepath.Join(CacheDir(), name)}
}

// lock takes the lock on the port.
func (f fixedPort) lock(ctx context.Context) (*os.File, error) { return lockFile(ctx, f.lockFile) }

// hold binds the port as the components do (every interface), or returns
// nil when something else holds it (then the functions' attempts fail
// just as well).
func (f fixedPort) hold() net.Listener {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", fmt.Sprintf(":%d", f.port))
	if err != nil {
		return nil
	}
	return l
}

// waitFree waits, under the lock, until the port can be bound; it fails
// naming the processes that hold it.
func (f fixedPort) waitFree(ctx context.Context, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func(context.Context) error {
		if l := f.hold(); l != nil {
			return l.Close()
		}
		return fmt.Errorf("port %d is taken by %s; Crossplane's RBAC manager needs it (it has no flag to serve elsewhere): stop that process",
			f.port, describeListeners(f.port))
	})
}

// startHolder starts, under the lock, the component that must own the
// port (the RBAC manager): once the port is free, and returns when the
// process itself listens on it. It returns the lock, to be released by
// releaseHolder; on an error neither the lock nor the process is left.
func (f fixedPort) startHolder(ctx context.Context, name, logFile string, cmd *exec.Cmd) (*os.File, *process, error) {
	lock, err := f.lock(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := f.waitFree(ctx, 2*time.Minute); err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	p, err := startProcess(name, logFile, cmd)
	if err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	// Nothing else starts before it holds the port: a function started
	// earlier would take it and the holder would exit.
	if err := waitListening(ctx, p, logFile, f.port, 2*time.Minute); err != nil {
		releaseHolder(p, lock)
		return nil, nil, err
	}
	return lock, p, nil
}

// startBeside starts a component that takes the port when it is free and
// ignores a failure (a function) while holder holds it, and returns when
// it serves gRPC at addr (its attempt on the port has failed by then). It
// fails with the holder's log if the holder has exited.
func startBeside(ctx context.Context, holder *process, holderLog, name, logFile string, cmd *exec.Cmd, addr string, cfg *tls.Config) (*process, error) {
	if holder.exited() {
		return nil, fmt.Errorf("%s exited (%w); its log %s ends:\n%s", holder.name, holder.err, holderLog, Tail(holderLog, 30))
	}
	p, err := startProcess(name, logFile, cmd)
	if err != nil {
		return nil, err
	}
	if err := awaitGRPC(ctx, p, logFile, addr, cfg, 2*time.Minute); err != nil {
		p.stop(syscall.SIGTERM)
		return nil, err
	}
	if holder.exited() {
		return p, fmt.Errorf("%s exited (%w) while %s started; its log %s ends:\n%s", holder.name, holder.err, name, holderLog, Tail(holderLog, 30))
	}
	return p, nil
}

// releaseHolder stops the holder, which returns once it has exited (its
// port is free then), and only then releases the lock.
func releaseHolder(p *process, lock *os.File) {
	p.stop(syscall.SIGTERM)
	if lock != nil {
		_ = lock.Close()
	}
}

// waitListening waits until the process p itself listens on port; it
// fails at once with p's log when p exits.
func waitListening(ctx context.Context, p *process, logFile string, port int, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func(context.Context) error {
		if p.exited() {
			return Permanent(fmt.Errorf("%s exited (%w) before it listened on port %d; its log %s ends:\n%s", p.name, p.err, port, logFile, Tail(logFile, 30)))
		}
		if slices.Contains(listenerPIDs(port), p.cmd.Process.Pid) {
			return nil
		}
		return fmt.Errorf("%s does not listen on port %d yet (held by %s)", p.name, port, describeListeners(port))
	})
}

// awaitGRPC waits until the gRPC server of process p at addr has accepted
// a connection and sent its HTTP/2 settings (over TLS when cfg is not
// nil): its Serve loop runs, which function-sdk-go enters only after it
// has started its metrics server. It fails at once with p's log when p
// exits.
func awaitGRPC(ctx context.Context, p *process, logFile, addr string, cfg *tls.Config, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func(ctx context.Context) error {
		if p.exited() {
			return Permanent(fmt.Errorf("%s exited (%w):\n%s", p.name, p.err, Tail(logFile, 30)))
		}
		return h2Settings(ctx, addr, cfg)
	})
}

// h2Settings sends an HTTP/2 client preface and an empty SETTINGS frame,
// and reads the server's first frame, which must be SETTINGS.
func h2Settings(ctx context.Context, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	defer c.Close() //nolint:errcheck // a probe
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)
	if _, err := c.Write(preface); err != nil {
		return err
	}
	hdr := make([]byte, 9)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return fmt.Errorf("no HTTP/2 settings from %s: %w", addr, err)
	}
	if hdr[3] != 0x4 {
		return fmt.Errorf("%s answered with HTTP/2 frame type %d, not SETTINGS", addr, hdr[3])
	}
	return nil
}

// listenerPIDs returns the processes that hold a listening TCP socket on
// port, from /proc (those of other users stay unknown without the right
// to read their descriptors).
func listenerPIDs(port int) []int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f) //nolint:gosec // the kernel's socket table
		if err != nil {
			continue
		}
		s := bufio.NewScanner(bytes.NewReader(b))
		s.Scan() // header
		for s.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(s.Text())
			if len(fs) < 10 || fs[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); !ok || err != nil || int(p) != port {
				continue
			}
			inodes["socket:["+fs[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", d.Name(), "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", d.Name(), "fd", fd.Name())); err == nil && inodes[l] {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// describeListeners names the processes listening on port, for messages.
func describeListeners(port int) string {
	pids := listenerPIDs(port)
	if len(pids) == 0 {
		return "no process this user can see"
	}
	var parts []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		name := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if len(name) > 200 {
			name = name[:200] + "..."
		}
		parts = append(parts, fmt.Sprintf("pid %d (%s)", pid, name))
	}
	return strings.Join(parts, ", ")
}

// clientTLS is the client side of core's mTLS to the functions: the client
// certificate in dir (issueTLSDir's tls.crt, tls.key) and its CA (ca.crt).
func clientTLS(dir string) (*tls.Config, error) {
	crt, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")) //nolint:gosec // the harness's own CA
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no certificate", filepath.Join(dir, "ca.crt"))
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{crt}, RootCAs: pool, NextProtos: []string{"h2"}}, nil
}
