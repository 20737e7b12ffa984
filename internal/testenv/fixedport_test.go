package testenv

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The stand-ins for the components that bind a fixed port, run by
// re-executing the test binary (before TestMain: nothing is started).
//
//   - holder: Crossplane's RBAC manager: starts slowly (a random delay up
//     to PPT_FAKE_DELAY), then binds the port or exits 1, as
//     controller-runtime's metrics server does;
//   - function: function-sdk-go's Serve: binds its gRPC address, starts a
//     goroutine that binds the port and ignores a failure, then serves
//     (HTTP/2 settings are enough for awaitGRPC). It logs "took the port"
//     when it got it.
func init() {
	mode := os.Getenv("PPT_FAKE")
	if mode == "" {
		return
	}
	port := os.Getenv("PPT_FAKE_PORT")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch mode {
	case "holder":
		d, _ := time.ParseDuration(os.Getenv("PPT_FAKE_DELAY"))
		if d > 0 {
			time.Sleep(rand.N(d)) //nolint:gosec // a test delay
		}
		l, err := net.Listen("tcp", ":"+port) //nolint:noctx // a stand-in
		if err != nil {
			fmt.Println("cannot start controller manager:", err)
			os.Exit(1)
		}
		fmt.Println("listening on", port)
		<-stop
		_ = l.Close()
		os.Exit(0)
	case "function":
		lis, err := net.Listen("tcp", os.Getenv("PPT_FAKE_ADDR")) //nolint:noctx // a stand-in
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		go func() {
			l, err := net.Listen("tcp", ":"+port) //nolint:noctx // a stand-in
			if err != nil {
				return // ignored, as function-sdk-go does
			}
			fmt.Println("took the port")
			heldPort = l // held until exit
		}()
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close() //nolint:errcheck // a stand-in
					b := make([]byte, 24+9)
					if _, err := io.ReadFull(c, b); err != nil {
						return
					}
					_, _ = c.Write([]byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0})
				}()
			}
		}()
		<-stop
		os.Exit(0)
	}
}

// heldPort keeps a function stand-in's listener from the collector.
var heldPort net.Listener

func fake(t *testing.T, mode, port string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec,noctx // the test binary itself
	cmd.Env = append(os.Environ(), append([]string{"PPT_FAKE=" + mode, "PPT_FAKE_PORT=" + port}, env...)...)
	return cmd
}

// TestFixedPortEnvironmentsStartTogether starts environments' worth of
// fixed-port components at once, as test packages under `go test -p 2`
// do, on a port and lock of its own: in each, a slow RBAC manager stand-in
// then two function stand-ins beside it, a while of package installation,
// the manager stopped, the functions kept for the environment's life
// (overlapping the next environments' managers); and beside them
// renderers (test/configuration) starting functions under a placeholder.
// No manager may exit and no function may ever take the port. Rounds:
// PPT_STRESS_ROUNDS (default 3).
func TestFixedPortEnvironmentsStartTogether(t *testing.T) {
	MajorIndependent(t)
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("PPT_STRESS_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	const envs, renderers = 4, 2
	dir := t.TempDir()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	fp := fixedPort{port: p, lockFile: filepath.Join(dir, "port.lock")}
	port := strconv.Itoa(p)
	ctx := context.Background()

	var logs []string
	var mu sync.Mutex
	addLog := func(f string) string { mu.Lock(); defer mu.Unlock(); logs = append(logs, f); return f }
	fn := func(name string) (string, *exec.Cmd, string) {
		q, err := FreePort()
		if err != nil {
			t.Error(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", q)
		return addr, fake(t, "function", port, "PPT_FAKE_ADDR="+addr), addLog(filepath.Join(dir, name+".log"))
	}
	started := 0
	for r := range rounds {
		var wg sync.WaitGroup
		for e := range envs {
			wg.Go(func() {
				name := fmt.Sprintf("r%d-env%d", r, e)
				mlog := addLog(filepath.Join(dir, name+"-manager.log"))
				lock, m, err := fp.startHolder(ctx, name+"-manager", mlog, fake(t, "holder", port, "PPT_FAKE_DELAY=400ms"))
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				var fns []*process
				defer func() {
					for _, f := range fns {
						f.stop(syscall.SIGTERM)
					}
				}()
				for i := range 2 {
					addr, cmd, flog := fn(fmt.Sprintf("%s-fn%d", name, i))
					f, err := startBeside(ctx, m, mlog, fmt.Sprintf("%s-fn%d", name, i), flog, cmd, addr, nil)
					if f != nil {
						fns = append(fns, f)
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
				time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) //nolint:gosec // installing packages
				if m.exited() {
					t.Errorf("%s: the manager exited while it was needed: %v\n%s", name, m.err, Tail(mlog, 5))
				}
				releaseHolder(m, lock)
				mu.Lock()
				started++
				mu.Unlock()
				time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond) //nolint:gosec // the environment's tests
			})
		}
		for i := range renderers {
			wg.Go(func() {
				name := fmt.Sprintf("r%d-render%d", r, i)
				lock, err := fp.lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				hold := fp.hold()
				addr, cmd, flog := fn(name)
				f, err := startProcess(name, flog, cmd)
				if err == nil {
					err = awaitGRPC(ctx, f, flog, addr, nil, time.Minute)
				}
				if hold != nil {
					time.Sleep(functionSettle) // as StartRenderer
					_ = hold.Close()
				}
				_ = lock.Close()
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
				time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond) //nolint:gosec // the renders
				if f != nil {
					f.stop(syscall.SIGTERM)
				}
			})
		}
		wg.Wait()
	}
	for _, f := range logs {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "took the port") {
			t.Errorf("%s: a function took the fixed port", filepath.Base(f))
		}
	}
	t.Logf("%d rounds: %d environments' managers started, held the port and stopped, %d renderers", rounds, started, rounds*renderers)
}
