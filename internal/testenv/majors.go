package testenv

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
)

// MatrixEnv is set (to the major) by make test's runner for the jobs of the
// PostgreSQL matrix: the runs, on the majors besides the default, of the
// packages whose tests talk to PostgreSQL. There a test that proves nothing
// that depends on the major skips itself (MajorIndependent).
const MatrixEnv = "PPT_PG_MATRIX"

// InMatrix reports whether this is a run of the PostgreSQL matrix.
func InMatrix() bool { return os.Getenv(MatrixEnv) != "" }

// MajorIndependent marks a test whose assertions do not depend on the
// PostgreSQL major (what it proves is Kubernetes' or OpenBao's side, or a
// decision the provider takes the same way on every major): it runs in the
// suite's run on the default major and skips itself in the matrix's.
//
// The harness keeps the mark honest: in the default run it hears every
// place of the PostgreSQL client where what runs depends on the major (a
// version point), and fails the package when a marked test reaches one that
// no unmarked test of the package reaches (then the matrix would run that
// SQL on no major but the default). Unmarked is the default: a test runs on
// every major unless it says otherwise.
func MajorIndependent(t testing.TB) {
	t.Helper()
	if InMatrix() {
		t.Skipf("proves nothing that depends on the PostgreSQL major: runs on the default major only (this is the matrix's run on %s)", os.Getenv(MatrixEnv))
	}
	points.mu.Lock()
	points.independent = t.Name()
	points.mu.Unlock()
	t.Cleanup(func() {
		points.mu.Lock()
		points.independent = ""
		points.mu.Unlock()
	})
}

// points are the version points reached in this process, split by whether
// a MajorIndependent test was running. A point reached by a controller
// while such a test runs counts as its, whichever object it was for; one
// reached after it ended (a later poll of an object it left) counts as
// unmarked. So the check sees what a marked test's own steps reach (its
// creates, repairs, cleanups, rotations), not what only the later polls of
// its leftovers would: the marks must still say the truth.
var points = struct {
	mu          sync.Mutex
	independent string              // the running MajorIndependent test, "" when none
	byMarked    map[string][]string // point -> the marked tests that reached it
	byUnmarked  map[string]bool     // point -> reached while no marked test ran
}{byMarked: map[string][]string{}, byUnmarked: map[string]bool{}}

func heard(point string) {
	points.mu.Lock()
	defer points.mu.Unlock()
	if points.independent == "" {
		points.byUnmarked[point] = true
		return
	}
	ts := points.byMarked[point]
	if len(ts) == 0 || ts[len(ts)-1] != points.independent {
		points.byMarked[point] = append(ts, points.independent)
	}
}

// listenToVersionPoints starts hearing the PostgreSQL client's version
// points (Main, in a run whose controllers run in the test process).
func listenToVersionPoints() { postgres.SetVersionPointHook(heard) }

// uncoveredVersionPoints are the version points only marked tests reached,
// each with those tests: what the matrix would no longer run on its majors.
// Empty unless this was the whole package on the default major (no -run or
// -skip narrowing it).
func uncoveredVersionPoints() []string {
	if InMatrix() || flagSet("test.run") || flagSet("test.skip") {
		return nil
	}
	return onlyMarkedReached()
}

// onlyMarkedReached are the version points only marked tests reached, each
// with those tests.
func onlyMarkedReached() []string {
	points.mu.Lock()
	defer points.mu.Unlock()
	var out []string
	for p, ts := range points.byMarked {
		if !points.byUnmarked[p] {
			out = append(out, fmt.Sprintf("%s (reached by %s)", p, strings.Join(ts, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

func flagSet(name string) bool {
	f := flag.Lookup(name)
	return f != nil && f.Value.String() != ""
}
