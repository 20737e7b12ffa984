package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sample = `=== RUN   TestA
--- PASS: TestA (0.01s)
=== RUN   TestB
=== RUN   TestB/one
    b_test.go:10: want 1, got 2
=== RUN   TestB/two
--- FAIL: TestB (1.00s)
    --- FAIL: TestB/one (0.50s)
    --- PASS: TestB/two (0.50s)
=== RUN   TestC
    c_test.go:5: boom
--- FAIL: TestC (0.10s)
FAIL
`

func TestWhatFailed(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(log, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"TestB", "TestB/one", "TestC"}, failures(log)); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	want := []string{
		"=== RUN   TestB\n=== RUN   TestB/one\n    b_test.go:10: want 1, got 2\n=== RUN   TestB/two\n--- FAIL: TestB (1.00s)",
		"    c_test.go:5: boom\n--- FAIL: TestC (0.10s)",
	}
	// The second block is cut to its last two lines.
	got := failedBlocks(log, 60)
	got[1] = failedBlocks(log, 2)[1]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failedBlocks (-want +got):\n%s", diff)
	}
}

func TestEstimateLeft(t *testing.T) {
	now := time.Unix(1000, 0)
	a, b, c, d, n1, n2 := &job{name: "a"}, &job{name: "b"}, &job{name: "c"}, &job{name: "d"}, &job{name: "n1"}, &job{name: "n2"}
	last := map[string]float64{"a": 100, "b": 200, "c": 300, "n1": 50, "n2": 100}
	pool, node := []*job{a, b, c, d}, []*job{n1, n2}
	cases := map[string]struct {
		lanes    int
		running  map[*job]time.Time
		finished map[*job]bool
		want     time.Duration
	}{
		// The pool: 100+200+300 and d unknown (60), over two workers.
		"nothing started": {1, map[*job]time.Time{}, map[*job]bool{}, 330 * time.Second},
		// c ran 250 s of its 300, b is done; the pool's 100+50+60 over two
		// workers is 105 s, the node lane's n2 100 s.
		"under way": {1, map[*job]time.Time{c: now.Add(-250 * time.Second)}, map[*job]bool{b: true, n1: true}, 105 * time.Second},
		// A job past its last duration counts nothing: the node lane is the
		// longer.
		"over time": {1, map[*job]time.Time{n2: now.Add(-10 * time.Second)}, map[*job]bool{a: true, b: true, c: true, d: true, n1: true}, 90 * time.Second},
		// Two node lanes: the node's 150 s over two would be 75, but n2
		// alone takes 100.
		"two lanes": {2, map[*job]time.Time{}, map[*job]bool{a: true, b: true, c: true, d: true}, 100 * time.Second},
		"all done":  {1, map[*job]time.Time{}, map[*job]bool{a: true, b: true, c: true, d: true, n1: true, n2: true}, 0},
	}
	for name, tc := range cases {
		if got := estimateLeft(node, pool, tc.running, tc.finished, last, tc.lanes, 2, now); got != tc.want {
			t.Errorf("%s: estimateLeft = %s, want %s", name, got, tc.want)
		}
	}
	// Two lanes share n1, n2 and n3's 50+100+130 s: 140 s, longer than
	// n3 alone.
	n3 := &job{name: "n3"}
	last["n3"] = 130
	if got, want := estimateLeft([]*job{n1, n2, n3}, nil, nil, nil, last, 2, 2, now), 140*time.Second; got != want {
		t.Errorf("two lanes shared: estimateLeft = %s, want %s", got, want)
	}
}

// The matrix: the SQL packages on every major, the rest of the matrix and
// its test/e2e tests on the branch majors only.
func TestPlanRunsTheSQLPackagesOnEveryMajorAndTheRestOnBranchMajors(t *testing.T) {
	o := options{
		nodePkgs:     []string{"../../test/e2e/"},
		sqlPkgs:      []string{"../../internal/clients/postgres/"},
		matrixPkgs:   []string{"../../internal/clients/postgres/", "../../internal/controller/database/"},
		majors:       []string{"15", "18"},
		branchMajors: map[string]bool{"15": true},
		matrixE2E:    "^TestX$",
		// A drill on the oldest major, 15 here.
		oldestPkgs: []string{"../../test/delivery/"},
		oldestRun:  "^TestY$",
		only:       `\[PG `,
	}
	jobs, err := plan(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.name)
	}
	want := []string{
		"internal/clients/postgres [PG 15]", "internal/controller/database [PG 15]", "test/e2e [PG 15]",
		"internal/clients/postgres [PG 18]",
		"test/delivery [PG 15]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the matrix's jobs (-want +got):\n%s", diff)
	}
}

// A run's TMPDIR is a directory of its own under the base; making one
// removes those of runs that no longer run, never one that still does.
func TestMakeTmpDirRemovesOnlyStoppedRuns(t *testing.T) {
	base := t.TempDir()
	// A run that ended: its PID is a process that has exited.
	done := exec.CommandContext(context.Background(), "true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	stopped, running := filepath.Join(base, tmpPrefix+"stopped"), filepath.Join(base, tmpPrefix+"running")
	for d, pid := range map[string]int{stopped: done.Process.Pid, running: os.Getpid()} {
		if err := os.MkdirAll(filepath.Join(d, "ppt-env-1"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "pid"), []byte(strconv.Itoa(pid)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, err := makeTmpDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stopped); !os.IsNotExist(err) {
		t.Errorf("the stopped run's directory is still there: %v", err)
	}
	if _, err := os.Stat(running); err != nil {
		t.Errorf("the running run's directory was removed: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(d, "pid"))
	if err != nil || string(b) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the new directory records PID %q (%v), want %d", b, err, os.Getpid())
	}
}
