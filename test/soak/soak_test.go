package main

import (
	"context"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.NodeMain(m, options, &env)
}

// The short soak: a few minutes of every fault kind, with a fixed seed, on
// the stack the long run uses. A regression that breaks an invariant under
// faults shows here; the figures come from the long run
// (docs/reliability.md).
func TestSoakShort(t *testing.T) {
	testenv.Need(t)
	c := defaultConfig()
	c.Seed, c.Duration, c.MaxWave, c.MaxLive, c.MaxFault, c.Settle = 20261205, 3*time.Minute, 6, 12, 8*time.Second, 3*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	r, err := soakOn(ctx, env, c, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Table())
	if r.Ops.Created == 0 || len(r.Injected) == 0 || r.Ops.RowsChecked == 0 {
		t.Errorf("the soak did too little to prove anything: %+v, faults %v", r.Ops, r.Injected)
	}
	for _, v := range r.Violations {
		t.Errorf("invariant violated: %s", v)
	}
}
