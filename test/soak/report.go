package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is a run's figures.
type Report struct {
	Seed     int64  `json:"seed"`
	Command  string `json:"command"`
	Duration string `json:"duration"`
	Elapsed  string `json:"elapsed"`
	// Injected counts the faults made, by kind.
	Injected map[string]int `json:"injected"`
	// Converge is, per fault kind (two at once: "a+b"), the times from the
	// fault's end until everything converged.
	Converge map[string][]time.Duration `json:"converge"`
	Ops      struct {
		Created, Deleted, Rotated, Released, Rebound, RowsChecked int
	} `json:"ops"`
	LogsScanned int      `json:"logsScanned"`
	Violations  []string `json:"violations"`
}

func newReport(c config) *Report {
	return &Report{
		Seed: c.Seed, Duration: c.Duration.String(), Injected: map[string]int{}, Converge: map[string][]time.Duration{},
		Command: fmt.Sprintf("go run ./test/soak -seed %d -duration %s -max-wave %d -max-live %d -max-fault %s -settle %s -faults %s",
			c.Seed, c.Duration, c.MaxWave, c.MaxLive, c.MaxFault, c.Settle, strings.Join(c.Kinds, ",")),
	}
}

func (r *Report) violation(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func (r *Report) injected(kind string) { r.Injected[kind]++ }

// uncovered names the kinds of change the run has not made yet, and
// "fault" while it has injected none.
func (r *Report) uncovered() []string {
	var out []string
	for _, o := range []struct {
		name string
		n    int
	}{{"created", r.Ops.Created}, {"deleted", r.Ops.Deleted}, {"rotated", r.Ops.Rotated}, {"released", r.Ops.Released}, {"rebound", r.Ops.Rebound}} {
		if o.n == 0 {
			out = append(out, o.name)
		}
	}
	if len(r.Injected) == 0 {
		out = append(out, "fault")
	}
	return out
}

func (r *Report) converged(kinds []string, took time.Duration) {
	k := strings.Join(kinds, "+")
	if len(kinds) > 1 {
		k = "two at once"
	}
	r.Converge[k] = append(r.Converge[k], took)
}

// quantile is the q-quantile (nearest rank) of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// Table prints the figures as docs/reliability.md shows them.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, faults for %s (run %s): %d Tenants created, %d deleted, %d released and %d of those rebound to a new Tenant, %d rotations; %d rows checked; %d logs scanned for panics\n\n",
		r.Seed, r.Duration, r.Elapsed, r.Ops.Created, r.Ops.Deleted, r.Ops.Released, r.Ops.Rebound, r.Ops.Rotated, r.Ops.RowsChecked, r.LogsScanned)
	fmt.Fprintf(&b, "| fault | injected | converged after: p50 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	var ks []string
	for k := range r.Converge {
		ks = append(ks, k)
	}
	for k := range r.Injected {
		if _, ok := r.Converge[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	for _, k := range ks {
		ds := slices.Clone(r.Converge[k])
		slices.Sort(ds)
		n := r.Injected[k]
		if k == "two at once" {
			n = len(ds)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", k, n, quantile(ds, 0.5).Round(100*time.Millisecond), quantile(ds, 0.99).Round(100*time.Millisecond), quantile(ds, 1).Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, "\ninvariant violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	fmt.Fprintf(&b, "\nreproduce: %s\n", r.Command)
	return b.String()
}
