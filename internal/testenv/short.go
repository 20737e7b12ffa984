package testenv

import (
	"flag"
	"testing"
)

// short reports whether the tests run with -short: then Main starts no
// component and the tests that need one skip themselves (Need). A TestMain
// runs before the testing flags are parsed, so parse them here.
func short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}

// Short reports whether the tests run with -short (Main starts no
// component then), for a TestMain that prepares something only the
// components use.
func Short() bool { return short() }

// Need marks a test that needs the real components Main starts: with -short
// (where Main starts none) it skips the test and says so; otherwise it does
// nothing, so a full run never skips a test.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real components (PostgreSQL, OpenBao, kube-apiserver, ...): run without -short")
	}
}
