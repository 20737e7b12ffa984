package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCountPacerSpacesOutCountsPerConfig(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := newCountPacer(2 * time.Second)
	p.now = func() time.Time { return now }
	type step struct {
		after  time.Duration
		config string
		want   time.Duration
	}
	steps := []step{
		{0, "shared", 0}, // the first count
		{500 * time.Millisecond, "shared", 1500 * time.Millisecond}, // a usage event right after: wait
		{0, "other", 0},                        // another config is not held back
		{1500 * time.Millisecond, "shared", 0}, // 2 s after the first: count
		{time.Second, "shared", time.Second},   // and wait again
	}
	var got []time.Duration
	var want []time.Duration
	for _, s := range steps {
		now = now.Add(s.after)
		got = append(got, p.wait(s.config))
		want = append(want, s.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}
