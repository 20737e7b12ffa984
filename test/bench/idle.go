package main

// Idle Tenants (-tenants-idle): after the largest wave has all its
// Secrets, the Tenants are left alone for a window, and what the stack
// does for them meanwhile is counted: renders, CPU by component,
// apiserver requests by request and by client, OpenBao requests, ESO
// syncs; per minute, and for each minute of the window.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// idleResult is one idle window.
type idleResult struct {
	N int
	// Settle is the wait after the wave's checks, before the window.
	Settle, Window time.Duration
	// Renders is the function's renders in the window; RendersMax the
	// most of one Tenant.
	Renders, RendersMax int
	CPU                 cpuShare
	// API is apiserver_request_total in the window by "VERB resource".
	API     map[string]float64
	Clients apiCounts
	Bao     baoCounts
	BaoErr  error
	// Syncs is ESO's reconciles of ExternalSecrets in the window.
	Syncs   float64
	Minutes []idleMinute
}

// idleMinute is one step of the window (a minute, the last one maybe
// shorter).
type idleMinute struct {
	Wall         time.Duration
	Renders      int
	ControlPlane time.Duration
	API          float64
}

// runIdle waits settle, then leaves the Tenants of s alone for window and
// counts what the stack does meanwhile.
func runIdle(ctx context.Context, c cfg, s *tenantStack, n int) (*idleResult, error) {
	b := s.b
	r := &idleResult{N: n, Settle: c.tenants.idleSettle, Window: c.tenants.idle}
	fmt.Printf("    idle: %d Tenants left alone, %s to settle, then a %s window\n", n, r.Settle, r.Window)
	if err := sleep(ctx, r.Settle); err != nil {
		return nil, err
	}
	fnLog := filepath.Join(b.Dir, "function.log")
	bao := startAudit(ctx, b)
	auditLog := ""
	if b.Kube != nil {
		auditLog = b.Kube.AuditLog
	}
	esoAddr := ""
	if b.ESO != nil {
		esoAddr = b.ESO.MetricsAddr
	}
	fn0, aud0 := fileSize(fnLog), fileSize(auditLog)
	api0 := apiserverRequests(ctx, b)
	syncs0 := esoSyncs(esoAddr)
	cpu0 := sampleCPU()
	t0 := time.Now()
	end := t0.Add(r.Window)
	prevT, prevCPU, prevRenders, prevAPI := t0, cpu0, functionRenders(b), sum(api0)
	for time.Now().Before(end) {
		if err := sleep(ctx, min(time.Minute, time.Until(end))); err != nil {
			return nil, err
		}
		now, cpu, renders, api := time.Now(), sampleCPU(), functionRenders(b), sum(apiserverRequests(ctx, b))
		m := idleMinute{Wall: now.Sub(prevT), Renders: renders - prevRenders, ControlPlane: controlPlane(cpu.sub(prevCPU)), API: api - prevAPI}
		r.Minutes = append(r.Minutes, m)
		fmt.Printf("      minute %d: %d renders, core+functions+apiserver %.2f CPU-s/min, %.0f apiserver requests/min\n",
			len(r.Minutes), m.Renders, perMinute(m.ControlPlane.Seconds(), m.Wall), perMinute(m.API, m.Wall))
		prevT, prevCPU, prevRenders, prevAPI = now, cpu, renders, api
		if err := s.p.Exited(); err != nil {
			return nil, err
		}
	}
	r.Window = time.Since(t0)
	r.CPU = sampleCPU().sub(cpu0)
	r.Syncs = esoSyncs(esoAddr) - syncs0
	r.API = map[string]float64{}
	for k, v := range apiserverRequests(ctx, b) {
		if d := v - api0[k]; d > 0 {
			r.API[k] = d
		}
	}
	fn1, aud1 := fileSize(fnLog), fileSize(auditLog)
	bao.mark()
	r.Bao, r.BaoErr = bao.stop()
	r.Clients = auditWindow(auditLog, aud0, aud1)
	lines, _ := readRange(fnLog, fn0, fn1)
	per := map[string]int{}
	for _, x := range parseRenders(lines) {
		r.Renders++
		per[x.NS]++
	}
	for _, v := range per {
		r.RendersMax = max(r.RendersMax, v)
	}
	return r, nil
}

func sum(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// top is "x in all, key x, ..." of the n largest values of m, with the
// given number of decimals.
func top(m map[string]float64, n, decimals int) string {
	keys := sortedByValue(m)
	if len(keys) > n {
		keys = keys[:n]
	}
	f := fmt.Sprintf("%%.%df", decimals)
	parts := []string{fmt.Sprintf(f+" in all", sum(m))}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s "+f, k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// idleTable reports the idle windows against their targets.
func idleTable(w *strings.Builder, bulks []*bulkResult) {
	var idles []*idleResult
	for _, r := range bulks {
		if r.Idle != nil {
			idles = append(idles, r.Idle)
		}
	}
	if len(idles) == 0 {
		return
	}
	fmt.Fprintf(w, "Idle Tenants: the wave's Tenants left alone once every Secret existed and logged in (then a settle), rates over the window\n\n")
	fmt.Fprintf(w, "| N | settle + window | renders / Tenant / hour (target ≤ 1) | core + functions + kube-apiserver CPU-s / min (target ≤ 3) | apiserver requests / min | OpenBao requests / min | ESO reconciles / min |\n|---|---|---|---|---|---|---|\n")
	for _, r := range idles {
		bao := fmt.Sprintf("%.2f", perMinute(float64(r.Bao.Requests), r.Window))
		if r.BaoErr != nil {
			bao = "– (" + r.BaoErr.Error() + ")"
		}
		fmt.Fprintf(w, "| %d | %s + %s | %.2f (%d renders, at most %d of one Tenant) | %.2f | %.1f | %s | %.2f |\n", r.N, r.Settle, r.Window.Round(time.Second),
			perTenantHour(float64(r.Renders), r.N, r.Window), r.Renders, r.RendersMax, perMinute(controlPlane(r.CPU).Seconds(), r.Window),
			perMinute(sum(r.API), r.Window), bao, perMinute(r.Syncs, r.Window))
	}
	fmt.Fprintln(w)
	for _, r := range idles {
		mins := r.Window.Minutes()
		fmt.Fprintf(w, "- N=%d idle, CPU-s per minute by component: %s; machine busy %.0f%%\n", r.N, cpuPerMinute(r.CPU, r.Window), 100*r.CPU.Busy.Seconds()/r.Window.Seconds()/float64(numCPU()))
		fmt.Fprintf(w, "- N=%d idle, apiserver requests per minute by request (all clients): %s\n", r.N, top(scale(r.API, mins), 12, 2))
		if len(r.Clients.ByClient) > 0 {
			fmt.Fprintf(w, "- N=%d idle, apiserver requests per minute by client: %s\n", r.N, top(scale(r.Clients.ByClient, mins), 12, 2))
			fmt.Fprintf(w, "- N=%d idle, apiserver requests per minute by client and request: %s\n", r.N, top(scale(r.Clients.ByClientRequest, mins), 15, 2))
		}
		if r.BaoErr == nil {
			fmt.Fprintf(w, "- N=%d idle, OpenBao requests per minute by operation: %s\n", r.N, top(scale(intsToFloats(r.Bao.ByOp), mins), 8, 2))
		}
		var each []string
		for i, m := range r.Minutes {
			each = append(each, fmt.Sprintf("%d: %d renders, %.2f CPU-s, %.0f requests", i+1, m.Renders, perMinute(m.ControlPlane.Seconds(), m.Wall), perMinute(m.API, m.Wall)))
		}
		fmt.Fprintf(w, "- N=%d idle, each minute (renders; core + functions + apiserver CPU-s per minute; apiserver requests per minute): %s\n", r.N, strings.Join(each, "; "))
	}
	fmt.Fprintln(w)
}

func intsToFloats(m map[string]int) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}

// verdict is "met" or "**missed**".
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// tenantTargets is the Tenant targets beside what each run measured. The
// wave targets are set for 200 and 1000 Tenants and the idle one for 1000;
// smaller runs are shown against them too, marked as such.
func tenantTargets(w *strings.Builder, floors map[int]*tenantFloorResult, bulks []*bulkResult) {
	if len(bulks) == 0 {
		return
	}
	fmt.Fprintf(w, "Tenant targets (set for waves of 200 and 1000 and for 1000 idle Tenants; other sizes are shown against them for reference)\n\n")
	fmt.Fprintf(w, "| target | N | measured | verdict |\n|---|---|---|---|\n")
	for _, r := range bulks {
		if r.RendersParsed == 0 && r.Renders > 0 {
			fmt.Fprintf(w, "| renders per Tenant until its Secret exists ≤ 6 | %d | – (no render time read from the function's log; %.1f until all Secrets existed) | not measured |\n", r.N, r.Renders)
			continue
		}
		own := r.RendersOwnMean()
		fmt.Fprintf(w, "| renders per Tenant until its Secret exists ≤ 6 | %d | %.1f | %s |\n", r.N, own, verdict(own <= 6))
	}
	for _, r := range bulks {
		req := sum(r.APIRequests)
		fmt.Fprintf(w, "| apiserver requests per Tenant ≤ 45 (until all Secrets existed) | %d | %.1f | %s |\n", r.N, req, verdict(req <= 45))
	}
	for _, r := range bulks {
		if f := floors[r.N]; f != nil {
			x := r.Ready.Seconds() / f.Total.Seconds()
			if r.N >= 1000 {
				fmt.Fprintf(w, "| (ratio to the floor: no target at 1000) | %d | %.2f× | – |\n", r.N, x)
				continue
			}
			fmt.Fprintf(w, "| 200 Tenants ≤ 4× the floor | %d | %.2f× | %s |\n", r.N, x, verdict(x <= 4))
		}
	}
	for _, r := range bulks {
		if len(r.Each) > 0 {
			fmt.Fprintf(w, "| first Secret ≤ 5 s | %d | %.1f s | %s |\n", r.N, r.Each[0].Seconds(), verdict(r.Each[0] <= 5*time.Second))
		}
	}
	for _, r := range bulks {
		if i := r.Idle; i != nil {
			rh := perTenantHour(float64(i.Renders), i.N, i.Window)
			cp := perMinute(controlPlane(i.CPU).Seconds(), i.Window)
			fmt.Fprintf(w, "| 1000 idle Tenants ≤ 1 render per Tenant per hour | %d | %.2f | %s |\n", i.N, rh, verdict(rh <= 1))
			fmt.Fprintf(w, "| 1000 idle Tenants ≤ 3 CPU-s/min for core + functions + kube-apiserver | %d | %.2f | %s |\n", i.N, cp, verdict(cp <= 3))
		}
	}
	fmt.Fprintln(w)
}
