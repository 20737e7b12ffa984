package main

import (
	"os"
	"path/filepath"
	"testing"

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
