package main

// What the Tenant runs count besides time: kube-apiserver's requests by
// client (its audit log), the composition function's renders (its debug
// log), ESO's reconciles (its metrics), and the rates and component groups the
// reports and the targets use.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// apiCounts is what kube-apiserver's audit log says about a window: one
// count per request, by client and by client and request.
type apiCounts struct {
	// ByClient is requests by client: the user agent's program name (what
	// client-go puts before the first "/"), or the user when the agent
	// names no program.
	ByClient map[string]float64
	// ByClientRequest is requests by "client: VERB resource".
	ByClientRequest map[string]float64
}

// auditEvent is the part of a kube-apiserver audit event counted.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestURI string `json:"requestURI"`
}

// countAudit counts the requests of audit log lines: a request once its
// response is complete; a watch once it started (it completes only when it
// ends, which may be after the window).
func countAudit(lines []string) apiCounts {
	c := apiCounts{ByClient: map[string]float64{}, ByClientRequest: map[string]float64{}}
	for _, l := range lines {
		var e auditEvent
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		watch := e.Verb == "watch"
		if (watch && e.Stage != "ResponseStarted") || (!watch && e.Stage != "ResponseComplete" && e.Stage != "Panic") {
			continue
		}
		who := clientOf(e.UserAgent, e.User.Username)
		res := e.RequestURI
		if e.ObjectRef != nil {
			res = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				res += "/" + e.ObjectRef.Subresource
			}
		} else if i := strings.IndexByte(res, '?'); i >= 0 {
			res = res[:i]
		}
		c.ByClient[who]++
		c.ByClientRequest[who+": "+strings.ToUpper(e.Verb)+" "+res]++
	}
	return c
}

// clientOf names the client of a request: the program client-go names in
// the user agent ("crossplane-core/v2.1.0 (linux/amd64) kubernetes/abc" is
// crossplane-core), else the user.
func clientOf(userAgent, user string) string {
	prog, _, _ := strings.Cut(userAgent, "/")
	prog = strings.TrimSpace(prog)
	if prog == "" || strings.EqualFold(prog, "Go-http-client") || strings.ContainsAny(prog, " (") {
		if user != "" {
			return user
		}
		return "unknown"
	}
	return prog
}

// auditWindow reads the audit log between two byte offsets (0: from the
// start; an empty log: nothing).
func auditWindow(file string, from, to int64) apiCounts {
	if file == "" {
		return apiCounts{}
	}
	lines, _ := readRange(file, from, to)
	return countAudit(lines)
}

// scale divides every value of m by div (zero values dropped).
func scale(m map[string]float64, div float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if v != 0 && div != 0 {
			out[k] = v / div
		}
	}
	return out
}

// perMinute is a count over d as a rate per minute.
func perMinute(v float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return v / d.Minutes()
}

// perTenantHour is a count over n Tenants and d as a rate per Tenant per
// hour.
func perTenantHour(v float64, n int, d time.Duration) float64 {
	if d <= 0 || n <= 0 {
		return 0
	}
	return v / float64(n) / d.Hours()
}

// components are the groups CPU is reported by, in the report's order,
// and the process names (as /proc/<pid>/stat has them, at most 15
// characters) each takes. A name no group takes is "other".
var components = []struct{ name, prefix string }{
	{"core", "crossplane"},
	{"function", "function"},
	{"kube-apiserver", "kube-apiserver"},
	{"etcd", "etcd"},
	{"provider", "provider"},
	{"ESO", "external-secret"},
	{"OpenBao", "bao"},
	{"PostgreSQL", "postgres"},
	{"bench", "bench"},
}

// byComponent groups CPU time by component.
func byComponent(c cpuShare) map[string]time.Duration {
	out := map[string]time.Duration{}
	for proc, d := range c.By {
		g := "other"
		for _, k := range components {
			if strings.HasPrefix(proc, k.prefix) {
				g = k.name
				break
			}
		}
		out[g] += d
	}
	return out
}

// controlPlane is the CPU time of Crossplane core, its functions and
// kube-apiserver: the part the idle target bounds.
func controlPlane(c cpuShare) time.Duration {
	g := byComponent(c)
	return g["core"] + g["function"] + g["kube-apiserver"]
}

// cpuPerMinute is "component x.xx, ..." in CPU-s per minute over d, in the
// components' order, then other.
func cpuPerMinute(c cpuShare, d time.Duration) string {
	g := byComponent(c)
	var parts []string
	for _, k := range append(components, struct{ name, prefix string }{"other", ""}) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k.name, perMinute(g[k.name].Seconds(), d)))
	}
	return strings.Join(parts, ", ")
}

// render is one render in the composition function's debug log.
type render struct {
	At time.Time
	NS string
}

// functionLogTime is how the function's development logger writes times.
const functionLogTime = "2006-01-02T15:04:05.000Z0700"

// parseRenders reads the renders from the function's debug log lines
// ("<time>\tDEBUG\t<caller>\trendered\t{"namespace": ..., ...}").
func parseRenders(lines []string) []render {
	var out []render
	for _, l := range lines {
		f := strings.Split(l, "\t")
		i := -1
		for j, v := range f {
			if v == "rendered" {
				i = j
				break
			}
		}
		if i < 1 || i+1 >= len(f) {
			continue
		}
		at, err := time.Parse(functionLogTime, f[0])
		if err != nil {
			continue
		}
		var fields struct {
			Namespace string `json:"namespace"`
		}
		if json.Unmarshal([]byte(f[i+1]), &fields) != nil {
			continue
		}
		out = append(out, render{At: at, NS: fields.Namespace})
	}
	return out
}

// rendersUntil counts each namespace's renders up to (and at) its time in
// until; namespaces not in until are not counted.
func rendersUntil(rs []render, until map[string]time.Time) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		if t, ok := until[r.NS]; ok && !r.At.After(t) {
			out[r.NS]++
		}
	}
	return out
}

// spreadInts is "mean m (p50 a, p90 b, max c)" of the values, a count per
// key; keys absent count as 0 over n keys.
func spreadInts(m map[string]int, n int) string {
	if n == 0 {
		return "–"
	}
	v := make([]int, 0, n)
	sum := 0
	for _, x := range m {
		v = append(v, x)
		sum += x
	}
	for len(v) < n {
		v = append(v, 0)
	}
	sort.Ints(v)
	at := func(q float64) int { return v[int(q*float64(len(v)-1))] }
	return fmt.Sprintf("mean %.1f (p50 %d, p90 %d, max %d)", float64(sum)/float64(n), at(0.5), at(0.9), v[len(v)-1])
}

// esoSyncs is ESO's externalsecret_sync_calls_total: its reconciles of
// ExternalSecrets, each one a sync when the ExternalSecret is new, changed
// or due, else a check that requeues it (0 when it cannot be read).
func esoSyncs(addr string) float64 {
	if addr == "" {
		return 0
	}
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback, short
	if err != nil {
		return 0
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	var buf strings.Builder
	_, _ = bufioCopy(&buf, resp)
	var sum float64
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "externalsecret_sync_calls_total{") || strings.HasPrefix(l, "externalsecret_sync_calls_total ") {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// cpuGroups is "component x.x, ..." in CPU-s, in the components' order,
// then other (groups under 0.05 s left out).
func cpuGroups(c cpuShare) string {
	g := byComponent(c)
	var parts []string
	for _, k := range append(components, struct{ name, prefix string }{"other", ""}) {
		if g[k.name] >= 50*time.Millisecond {
			parts = append(parts, fmt.Sprintf("%s %.1f", k.name, g[k.name].Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}

// esoPerSync is ESO's CPU-s per reconcile (0 without any).
func esoPerSync(c cpuShare, syncs float64) float64 {
	if syncs <= 0 {
		return 0
	}
	return byComponent(c)["ESO"].Seconds() / syncs
}
