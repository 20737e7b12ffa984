package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The short soak's cycles are counted, not timed: MinCycles start however
// long they take, then Cover goes on while a kind of change or a fault is
// missing, and MaxCycles ends it.
func TestCyclesAreCountedNotTimed(t *testing.T) {
	covered := func() *Report {
		r := &Report{Injected: map[string]int{"provider-kill": 1}}
		r.Ops.Created, r.Ops.Deleted, r.Ops.Rotated, r.Ops.Released, r.Ops.Rebound = 1, 1, 1, 1, 1
		return r
	}
	missing := func() *Report {
		r := covered()
		r.Ops.Rebound = 0
		r.Injected = map[string]int{}
		return r
	}
	long := time.Now().Add(-time.Hour) // the run began an hour ago
	cases := map[string]struct {
		c     config
		r     *Report
		cycle int
		want  bool
	}{
		"WithinMinCycles":       {config{MinCycles: 8}, covered(), 8, true},
		"PastMinCyclesCovered":  {config{MinCycles: 8, Cover: true}, covered(), 9, false},
		"PastMinCyclesMissing":  {config{MinCycles: 8, Cover: true}, missing(), 9, true},
		"MissingWithoutCover":   {config{MinCycles: 8}, missing(), 9, false},
		"MissingPastMaxCycles":  {config{MinCycles: 8, MaxCycles: 40, Cover: true}, missing(), 41, false},
		"WithinDuration":        {config{Duration: 2 * time.Hour}, covered(), 100, true},
		"PastDurationCountsNot": {config{Duration: time.Minute}, covered(), 2, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &soak{c: tc.c, report: tc.r}
			if got := s.more(tc.cycle, long); got != tc.want {
				t.Errorf("more(%d) = %v, want %v", tc.cycle, got, tc.want)
			}
		})
	}
	if diff := cmp.Diff([]string{"rebound", "fault"}, missing().uncovered()); diff != "" {
		t.Errorf("uncovered (-want +got):\n%s", diff)
	}
	if u := covered().uncovered(); len(u) != 0 {
		t.Errorf("uncovered = %v, want none", u)
	}
}
