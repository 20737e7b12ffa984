package testenv

import (
	"testing"
)

// TestVersionPointsOnlyMarkedTestsReachAreNamed: a version point reached
// only while a MajorIndependent test ran is named with that test; one also
// reached while no marked test ran is not; in the matrix's run nothing is
// checked (there the marked tests do not run), nor in a run narrowed by
// -run (as this one may be).
func TestVersionPointsOnlyMarkedTestsReachAreNamed(t *testing.T) {
	saved := points.byMarked
	savedU := points.byUnmarked
	t.Cleanup(func() {
		points.mu.Lock()
		points.byMarked, points.byUnmarked, points.independent = saved, savedU, ""
		points.mu.Unlock()
	})
	points.mu.Lock()
	points.byMarked, points.byUnmarked = map[string][]string{}, map[string]bool{}
	points.mu.Unlock()

	heard("qObserve") // an unmarked test
	t.Run("marked", func(t *testing.T) {
		t.Setenv(MatrixEnv, "")
		MajorIndependent(t)
		heard("qObserve")
		heard("CleanupAccess.revokeMember")
		heard("CleanupAccess.revokeMember")
	})
	heard("PinnedSettings") // unmarked again, after the marked test's cleanup

	got := onlyMarkedReached()
	want := "CleanupAccess.revokeMember (reached by TestVersionPointsOnlyMarkedTestsReachAreNamed/marked)"
	if len(got) != 1 || got[0] != want {
		t.Errorf("uncovered version points %q, want [%q]", got, want)
	}
	t.Setenv(MatrixEnv, "16")
	if got := uncoveredVersionPoints(); len(got) != 0 {
		t.Errorf("in the matrix's run: %q, want nothing checked", got)
	}
}
