package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The server log as PostgreSQL 17 writes it with log_statement=all and
// log_connections (PostgreSQL 14 to 16 write "parameters:" in lower case).
func TestCountPG(t *testing.T) {
	lines := []string{
		"2026-12-01 02:48:56.061 UTC [100] adm@postgres LOG:  connection authorized: user=adm database=postgres SSL enabled",
		"2026-12-01 02:48:56.061 UTC [101] t0001@t0001 LOG:  connection authorized: user=t0001 database=t0001 SSL enabled",
		"2026-12-01 02:48:57.067 UTC [100] adm@postgres LOG:  execute stmtcache_1: " + observeQueryStart + ",",
		"  EXISTS (SELECT 1 FROM pg_catalog.aclexplode(...)",
		"2026-12-01 02:48:57.067 UTC [100] adm@postgres DETAIL:  Parameters: $1 = 't0001', $2 = 't0001'",
		"2026-12-01 02:48:57.068 UTC [100] adm@postgres LOG:  execute stmtcache_2: SELECT other($1)",
		"2026-12-01 02:48:57.068 UTC [100] adm@postgres DETAIL:  Parameters: $1 = 't0002'",
		"2026-12-01 02:48:57.069 UTC [102] adm@postgres LOG:  execute stmtcache_1: " + observeQueryStart + ",",
		"2026-12-01 02:48:57.069 UTC [102] adm@postgres DETAIL:  parameters: $1 = 't0003', $2 = 't0003'",
		"2026-12-01 02:48:57.070 UTC [101] t0001@t0001 LOG:  statement: SELECT extname FROM pg_catalog.pg_extension",
	}
	c := countPG(lines, "adm", "su")
	want := pgCounts{AdminConns: 1, TenantConns: 1, AdminStmts: 3, TenantStmts: 1, Observes: 2,
		ObservesOf: map[string]int{"t0001": 1, "t0003": 1}}
	c.ByText = nil
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("countPG (-want +got):\n%s", diff)
	}
}

func TestCaughtUp(t *testing.T) {
	prev := ctrlSample{QueueSum: 100, QueueCount: 1000}
	cases := []struct {
		name string
		cur  ctrlSample
		n    int
		want bool
	}{
		{"short queue, short wait", ctrlSample{Depth: 3, QueueSum: 110, QueueCount: 1500}, 200, true},
		{"nothing taken, nothing waiting", ctrlSample{Depth: 0, QueueSum: 100, QueueCount: 1000}, 200, true},
		{"long queue", ctrlSample{Depth: 11, QueueSum: 110, QueueCount: 1500}, 200, false},
		{"a long queue is relative to N", ctrlSample{Depth: 40, QueueSum: 110, QueueCount: 1500}, 10000, true},
		{"long wait", ctrlSample{Depth: 3, QueueSum: 700, QueueCount: 1500}, 200, false},
	}
	for _, c := range cases {
		if got := caughtUp(prev, c.cur, c.n); got != c.want {
			t.Errorf("%s: caughtUp = %v, want %v", c.name, got, c.want)
		}
	}
}
