package memo

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

type proof struct {
	Version int
	Names   []string
	Due     time.Time
}

func due(p proof) time.Time { return p.Due }

func TestMemo(t *testing.T) {
	m := New(func(p proof) proof { p.Names = slices.Clone(p.Names); return p }, due)
	now := time.Unix(1000, 0)
	if got := m.Get("a"); got != nil {
		t.Fatalf("Get of nothing kept = %+v, want nil", got)
	}
	m.Put("a", proof{Version: 1, Names: []string{"x"}, Due: now.Add(time.Hour)}, now)
	m.Put("b", proof{Version: 2, Due: now.Add(time.Hour)}, now)
	got := m.Get("a")
	if diff := cmp.Diff(&proof{Version: 1, Names: []string{"x"}, Due: now.Add(time.Hour)}, got); diff != "" {
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

// What was kept for an object nobody looks at any more (deleted while its
// controller was not looking) is dropped once due; nothing not yet due is.
func TestPutDropsWhatIsDue(t *testing.T) {
	m := New(nil, due)
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		m.Put(types.UID(fmt.Sprintf("gone-%d", i)), proof{Due: t0.Add(time.Minute)}, t0)
	}
	m.Put("live", proof{Due: t0.Add(3 * time.Hour)}, t0)
	if got := m.Len(); got != 101 {
		t.Fatalf("Len = %d, want 101: nothing is due yet", got)
	}
	// An hour later only "live" and "other" are looked at again, each Put
	// proving it afresh.
	later := t0.Add(time.Hour)
	for range 60 {
		m.Put("live", proof{Due: later.Add(time.Hour)}, later)
		m.Put("other", proof{Due: later.Add(time.Hour)}, later)
	}
	if got := m.Len(); got != 2 {
		t.Errorf("Len = %d after 120 Puts an hour later, want 2: the 100 values due since were kept", got)
	}
	if m.Get("live") == nil || m.Get("other") == nil {
		t.Error("a value not yet due was dropped")
	}
}
