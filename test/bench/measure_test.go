package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"
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

func TestCreateDatabaseStrategy(t *testing.T) {
	for _, tc := range []struct {
		major int
		want  string
	}{
		{14, "file_copy"},
		{15, "wal_log"},
		{17, "wal_log"},
		{18, "wal_log"},
	} {
		got, _, _ := strings.Cut(createDatabaseStrategy(tc.major), " ")
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("createDatabaseStrategy(%d) (-want +got):\n%s", tc.major, diff)
		}
	}
}

func TestMachineCounters(t *testing.T) {
	meminfo := "MemTotal:       24683624 kB\nDirty:            102084 kB\nWriteback:             0 kB\n"
	pressure := "some avg10=2.96 avg60=1.50 avg300=1.21 total=229674845\nfull avg10=0.00 avg60=0.46 avg300=0.74 total=66235033\n"
	got := []int64{meminfoKiB(meminfo, "Dirty"), meminfoKiB(meminfo, "Writeback"), meminfoKiB(meminfo, "Absent"), pressureTotal(pressure), pressureTotal("")}
	if diff := cmp.Diff([]int64{102084, 0, 0, 229674845, 0}, got); diff != "" {
		t.Errorf("meminfo and pressure counters (-want +got):\n%s", diff)
	}
	a := serverActivity{Checkpoints: 3, WALBytes: 10 << 20, DirtyKiB: 1024, IOStallUS: 1_000_000}
	b := serverActivity{Checkpoints: 5, WALBytes: 410 << 20, DirtyKiB: 2048 * 1024, IOStallUS: 3_500_000}
	want := "2 checkpoints, 400 MiB of WAL (4.0 MiB per CREATE DATABASE), dirty page cache 1 → 2048 MiB, tasks stalled on I/O 2.5 s (machine-wide)"
	if diff := cmp.Diff(want, activityNote(a, b, 100)); diff != "" {
		t.Errorf("activityNote (-want +got):\n%s", diff)
	}
}

func TestAlternate(t *testing.T) {
	var got []string
	for i := 0; i < 3; i++ {
		_ = alternate(i, func() error { got = append(got, "floor"); return nil }, func() error { got = append(got, "plain"); return nil })
	}
	if diff := cmp.Diff([]string{"floor", "plain", "plain", "floor", "floor", "plain"}, got); diff != "" {
		t.Errorf("alternate (-want +got):\n%s", diff)
	}
}

// failingSession echoes every statement in its error, as a careless
// driver or wrapper might.
type failingSession struct{}

func (failingSession) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("refused: " + strings.Fields(sql)[0])
}

func (failingSession) Close(context.Context) error { return nil }

// The plain loop's CREATE ROLE carries the role's SCRAM verifier: an error
// of the loop names the statement by its position, never by its text.
func TestPlainLoopErrorQuotesNoStatement(t *testing.T) {
	verifier := "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy"
	l := &plainLoop{admin: failingSession{}}
	err := l.exec(context.Background(), "CREATE ROLE t0001 LOGIN PASSWORD '"+verifier+"'", "GRANT t0001 TO CURRENT_USER")
	if err == nil {
		t.Fatal("no error from a failing session")
	}
	if strings.Contains(err.Error(), verifier) || strings.Contains(err.Error(), "PASSWORD") {
		t.Errorf("the error quotes the statement: %v", err)
	}
	if diff := cmp.Diff("plain loop, statement 1 of 2: refused: CREATE", err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}
