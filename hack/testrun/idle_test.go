package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCPUTimes(t *testing.T) {
	cases := map[string]struct {
		stat    string
		want    cpuTimes
		wantErr bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// guest time is already in user and nice, so it is not added again.
		"Aggregate":  {stat: "cpu  100 10 50 800 40 0 5 0 70 3\ncpu0 50 5 25 400 20 0 2 0 35 1\n", want: cpuTimes{total: 1005, idle: 840}},
		"NoGuest":    {stat: "cpu 1 2 3 4 5 6 7\n", want: cpuTimes{total: 28, idle: 9}},
		"PerCPU":     {stat: "cpu0 1 2 3 4 5\n", wantErr: true},
		"Short":      {stat: "cpu 1 2 3\n", wantErr: true},
		"NotANumber": {stat: "cpu 1 2 x 4 5\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseCPUTimes(tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(cpuTimes{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestIdleShare(t *testing.T) {
	cases := map[string]struct {
		prev, cur cpuTimes
		want      float64
	}{
		"Busy":          {cpuTimes{1000, 100}, cpuTimes{1200, 100}, 0},
		"Half":          {cpuTimes{1000, 100}, cpuTimes{1200, 200}, 0.5},
		"NoTimePassed":  {cpuTimes{1000, 100}, cpuTimes{1000, 100}, 0},
		"CountersReset": {cpuTimes{1000, 100}, cpuTimes{10, 5}, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := idleShare(tc.prev, tc.cur); got != tc.want {
				t.Errorf("idleShare = %v, want %v", got, tc.want)
			}
		})
	}
}

// The extra node lanes start only after enough idle windows in a row: one
// busy window (a job starting its servers) starts the count again.
func TestIdleStreakNeedsWindowsInARow(t *testing.T) {
	cases := map[string]struct {
		shares []float64
		want   []bool
	}{
		"ThreeIdle":        {[]float64{0.4, 0.3, 0.5}, []bool{false, false, true}},
		"BusyBreaksStreak": {[]float64{0.4, 0.4, 0.1, 0.4, 0.4, 0.4}, []bool{false, false, false, false, false, true}},
		"NeverIdleEnough":  {[]float64{0.29, 0.29, 0.29, 0.29}, []bool{false, false, false, false}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := idleStreak{share: 0.3, need: 3}
			var got []bool
			for _, v := range tc.shares {
				got = append(got, s.add(v))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
