package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
)

// When a node lane besides the first starts. A test node beside the pool
// costs most of a core; on a machine whose two cores the pool and the
// first node already keep busy, a second node only slows every job down
// (measured: the database package's matrix jobs twice as slow, and two
// drills failing on their bounds). On a machine fast enough to leave a
// core partly idle, waiting for the pool's last job to start left the
// second node idle for minutes. So the extra lanes start at whichever
// comes first: every pool job started, or the CPU idle for at least
// laneIdleShare of its time through laneIdleWindows windows in a row of
// laneIdleWindow each.
const (
	laneIdleShare   = 0.30
	laneIdleWindow  = 20 * time.Second
	laneIdleWindows = 3
)

// cpuTimes are the machine's CPU counters of /proc/stat's first line, in
// clock ticks: all of them, and those idle (idle and iowait).
type cpuTimes struct{ total, idle uint64 }

// parseCPUTimes reads /proc/stat's aggregate "cpu" line.
func parseCPUTimes(stat string) (cpuTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, errors.New("no aggregate cpu line in /proc/stat")
	}
	var c cpuTimes
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, err
		}
		// user nice system idle iowait irq softirq steal (guest and
		// guest_nice are already counted in user and nice).
		if i >= 8 {
			break
		}
		c.total += v
		if i == 3 || i == 4 {
			c.idle += v
		}
	}
	return c, nil
}

// idleShare is the share of the CPU's time idle between two readings (0
// when no time passed or the counters went back).
func idleShare(prev, cur cpuTimes) float64 {
	if cur.total <= prev.total || cur.idle < prev.idle {
		return 0
	}
	return float64(cur.idle-prev.idle) / float64(cur.total-prev.total)
}

// idleStreak counts the windows in a row whose idle share reached the
// threshold; it says when the extra lanes may start.
type idleStreak struct {
	share float64
	need  int
	n     int
}

// add takes one window's idle share and reports whether the streak is
// long enough.
func (s *idleStreak) add(share float64) bool {
	if share >= s.share {
		s.n++
	} else {
		s.n = 0
	}
	return s.n >= s.need
}

// whenIdle closes the returned channel once the CPU has been idle enough
// (laneIdleShare through laneIdleWindows windows), or never when
// /proc/stat cannot be read; it stops with ctx.
func whenIdle(ctx context.Context) <-chan struct{} {
	idle := make(chan struct{})
	read := func() (cpuTimes, error) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return cpuTimes{}, err
		}
		return parseCPUTimes(string(b))
	}
	prev, err := read()
	if err != nil {
		return idle
	}
	go func() {
		s := idleStreak{share: laneIdleShare, need: laneIdleWindows}
		t := time.NewTicker(laneIdleWindow)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := read()
			if err != nil {
				return
			}
			if s.add(idleShare(prev, cur)) {
				close(idle)
				return
			}
			prev = cur
		}
	}()
	return idle
}
