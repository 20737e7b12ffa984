// Command soak runs the whole product on the real stack, with the provider
// and the composition function as the Pods Crossplane makes on the test
// node, drives Tenants in waves (create, delete, rotate) and, driven by a
// seed, makes its components fail while it does: SIGKILL, graceful
// restarts, SIGSTOP pauses, OpenBao sealed, the node's Pod network cut.
// Each fault is bounded in time; after each, it measures how long until
// everything converges (every live Tenant Ready, rotations done, deleted
// Tenants gone), and at the end it checks what must hold whatever failed
// (docs/reliability.md lists the invariants and the figures of a run).
//
// Every fault stays inside the node's private network namespace and the
// processes of this run. The run stops by itself after -duration, or on
// SIGINT/SIGTERM (everything paused is resumed and everything started is
// stopped).
//
//	go run ./test/soak -seed 7 -duration 30m -max-wave 200 -out soak.json
//	go run ./test/soak -seed 1 -duration 3m -max-wave 6 -faults provider-kill,openbao-seal
//
// The exit code is 1 when an invariant was violated (each violation is
// printed), 2 when the run could not be made.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// options is the stack a soak runs on: the e2e suite's, with the provider
// polling every 10 s (drift is seen within a cycle's wait) and no leader
// election (one provider Pod, killed at will: a killed leader's Lease would
// make every restart wait it out).
var options = testenv.Options{
	Kube: true, Postgres: true, OpenBao: true, ESO: true, Crossplane: true,
	Node: true, NodeConfiguration: true,
	NodeProvider: &testenv.ProviderPodOptions{Args: []string{"--poll=10s", "--leader-election=false"}, Recreate: true},
}

func main() {
	c := defaultConfig()
	var faults string
	flag.Int64Var(&c.Seed, "seed", c.Seed, "the seed of the workload and of the faults: the same seed makes the same choices")
	flag.DurationVar(&c.Duration, "duration", c.Duration, "how long faults are injected; the run then settles and checks")
	flag.IntVar(&c.MaxWave, "max-wave", c.MaxWave, "the most Tenants created at once in one wave")
	flag.IntVar(&c.MaxLive, "max-live", c.MaxLive, "the most Tenants alive at once")
	flag.DurationVar(&c.MaxFault, "max-fault", c.MaxFault, "the longest one fault lasts")
	flag.DurationVar(&c.Settle, "settle", c.Settle, "how long after a fault ends everything must have converged")
	flag.StringVar(&faults, "faults", strings.Join(c.Kinds, ","), "the fault kinds to draw from")
	out := flag.String("out", "", "write the figures as JSON to this file")
	flag.Parse()
	c.Kinds = strings.Split(faults, ",")
	code, err := testenv.NodeRun(options, func() int { return run(c, *out) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: test node: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(c config, out string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	say := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[soak %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	e, err := testenv.Start(sctx, options)
	cancel()
	if err != nil {
		say("environment: %v", err)
		return 2
	}
	defer e.Stop()
	_, r, err := soakOn(ctx, e, c, say)
	if err != nil {
		say("%v", err)
		return 2
	}
	fmt.Println(r.Table())
	if out != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(out, b, 0o600); err != nil {
			say("%v", err)
			return 2
		}
	}
	if len(r.Violations) > 0 {
		for _, v := range r.Violations {
			say("VIOLATION: %s", v)
		}
		return 1
	}
	return 0
}

// soakOn registers the platform on a started environment and soaks it; it
// returns the run (what it made, for more checks) and its figures.
func soakOn(ctx context.Context, e *testenv.Env, c config, say func(string, ...any)) (*soak, *Report, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := tenantkit.Platform(pctx, e); err != nil {
		return nil, nil, fmt.Errorf("platform: %w", err)
	}
	prov, err := testenv.NewProviderPodControl(pctx, e)
	if err != nil {
		return nil, nil, fmt.Errorf("provider Pod: %w", err)
	}
	defer prov.Close()
	f, err := testenv.NewFaults(pctx, e)
	if err != nil {
		return nil, nil, fmt.Errorf("faults: %w", err)
	}
	defer f.Close()
	s, err := newSoak(e, f, c, say)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.Run(ctx)
	return s, r, err
}
