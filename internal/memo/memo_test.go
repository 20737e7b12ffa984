package memo

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type proof struct {
	Version int
	Names   []string
}

func TestMemo(t *testing.T) {
	m := New(func(p proof) proof { p.Names = slices.Clone(p.Names); return p })
	if got := m.Get("a"); got != nil {
		t.Fatalf("Get of nothing kept = %+v, want nil", got)
	}
	m.Put("a", proof{Version: 1, Names: []string{"x"}})
	m.Put("b", proof{Version: 2})
	got := m.Get("a")
	if diff := cmp.Diff(&proof{Version: 1, Names: []string{"x"}}, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	got.Names[0], got.Version = "changed", 9
	if again := m.Get("a"); again.Names[0] != "x" || again.Version != 1 {
		t.Errorf("a caller changed what is kept: %+v", again)
	}
	m.Forget("a")
	if m.Get("a") != nil || m.Get("b") == nil {
		t.Error("Forget dropped the wrong entry")
	}
	if s := m.Spread(); s < 0 || s >= 1 {
		t.Errorf("Spread() = %v, want [0, 1)", s)
	}
}
