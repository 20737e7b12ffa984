package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Audit events as kube-apiserver writes them at the Metadata level (trimmed
// to the fields read).
func TestCountAudit(t *testing.T) {
	lines := []string{
		`{"stage":"ResponseComplete","verb":"patch","userAgent":"crossplane-core/v2.1.0 (linux/amd64) kubernetes/abc","user":{"username":"admin"},"objectRef":{"resource":"tenants","subresource":"status"}}`,
		`{"stage":"ResponseComplete","verb":"patch","userAgent":"crossplane-core/v2.1.0 (linux/amd64) kubernetes/abc","user":{"username":"admin"},"objectRef":{"resource":"tenants","subresource":"status"}}`,
		`{"stage":"ResponseComplete","verb":"get","userAgent":"provider/v0.0.0 (linux/amd64) kubernetes/$Format","user":{"username":"system:serviceaccount:crossplane-system:provider"},"objectRef":{"resource":"tenants"}}`,
		// A watch counts once, when it starts; its completion does not.
		`{"stage":"ResponseStarted","verb":"watch","userAgent":"external-secrets/v0.16.2","user":{"username":"admin"},"objectRef":{"resource":"externalsecrets"}}`,
		`{"stage":"ResponseComplete","verb":"watch","userAgent":"external-secrets/v0.16.2","user":{"username":"admin"},"objectRef":{"resource":"externalsecrets"}}`,
		// A plain Go client is named by its user; a path without an object by the path.
		`{"stage":"ResponseComplete","verb":"get","userAgent":"Go-http-client/2.0","user":{"username":"system:apiserver"},"requestURI":"/livez?verbose"}`,
		// Not a request's end: not counted.
		`{"stage":"ResponseStarted","verb":"get","userAgent":"bench/v0.0.0","user":{"username":"admin"},"objectRef":{"resource":"secrets"}}`,
		`not json`,
	}
	want := apiCounts{
		ByClient: map[string]float64{"crossplane-core": 2, "provider": 1, "external-secrets": 1, "system:apiserver": 1},
		ByClientRequest: map[string]float64{
			"crossplane-core: PATCH tenants/status":   2,
			"provider: GET tenants":                   1,
			"external-secrets: WATCH externalsecrets": 1,
			"system:apiserver: GET /livez":            1,
		},
	}
	if diff := cmp.Diff(want, countAudit(lines)); diff != "" {
		t.Errorf("countAudit (-want +got):\n%s", diff)
	}
}

func TestClientOf(t *testing.T) {
	for _, tc := range []struct{ ua, user, want string }{
		{"crossplane-core/v2.1.0 (linux/amd64) kubernetes/abc", "admin", "crossplane-core"},
		{"kube-controller-manager/v1.35.4 (linux/amd64) kubernetes/x/system:serviceaccount:kube-system:generic-garbage-collector", "admin", "kube-controller-manager"},
		{"Go-http-client/2.0", "system:apiserver", "system:apiserver"},
		{"", "admin", "admin"},
		{"", "", "unknown"},
		{"Mozilla (X11) curl", "u", "u"},
	} {
		if diff := cmp.Diff(tc.want, clientOf(tc.ua, tc.user)); diff != "" {
			t.Errorf("clientOf(%q, %q) (-want +got):\n%s", tc.ua, tc.user, diff)
		}
	}
}

func TestRates(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"120 over 2 minutes", perMinute(120, 2*time.Minute), 60},
		{"30 s", perMinute(3, 30*time.Second), 6},
		{"no window", perMinute(3, 0), 0},
		{"1000 renders of 1000 Tenants in 10 minutes", perTenantHour(1000, 1000, 10*time.Minute), 6},
		{"no Tenants", perTenantHour(10, 0, time.Minute), 0},
		{"5 renders of 20 Tenants in 2 minutes", perTenantHour(5, 20, 2*time.Minute), 7.5},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if diff := cmp.Diff(map[string]float64{"GET tenants": 1.5, "PUT x": 0.5}, scale(map[string]float64{"GET tenants": 3, "PUT x": 1, "LIST y": 0}, 2)); diff != "" {
		t.Errorf("scale (-want +got):\n%s", diff)
	}
}

func TestByComponent(t *testing.T) {
	c := cpuShare{By: map[string]time.Duration{
		"crossplane-core": 4 * time.Second, "function": 2 * time.Second, "function-auto-r": time.Second,
		"kube-apiserver": 10 * time.Second, "etcd": time.Second, "provider": 3 * time.Second,
		"external-secret": 500 * time.Millisecond, "bao": 700 * time.Millisecond, "postgres": 6 * time.Second,
		"bench": time.Second, "kube-controller": 200 * time.Millisecond,
	}}
	want := map[string]time.Duration{
		"core": 4 * time.Second, "function": 3 * time.Second, "kube-apiserver": 10 * time.Second, "etcd": time.Second,
		"provider": 3 * time.Second, "ESO": 500 * time.Millisecond, "OpenBao": 700 * time.Millisecond, "PostgreSQL": 6 * time.Second,
		"bench": time.Second, "other": 200 * time.Millisecond,
	}
	if diff := cmp.Diff(want, byComponent(c)); diff != "" {
		t.Errorf("byComponent (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(17*time.Second, controlPlane(c)); diff != "" {
		t.Errorf("controlPlane (-want +got):\n%s", diff)
	}
	wantMin := "core 2.00, function 1.50, kube-apiserver 5.00, etcd 0.50, provider 1.50, ESO 0.25, OpenBao 0.35, PostgreSQL 3.00, bench 0.50, other 0.10"
	if diff := cmp.Diff(wantMin, cpuPerMinute(c, 2*time.Minute)); diff != "" {
		t.Errorf("cpuPerMinute (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(0.5/10, esoPerSync(c, 10)); diff != "" {
		t.Errorf("esoPerSync (-want +got):\n%s", diff)
	}
}

// The function's development logger: time, level, caller, message, fields.
func TestRendersUntil(t *testing.T) {
	lines := []string{
		"2026-12-02T12:00:01.000Z\tDEBUG\tfunction/fn.go:82\trendered\t{\"namespace\": \"bench-0000\", \"name\": \"app0000\", \"ready\": false}",
		"2026-12-02T12:00:02.500Z\tDEBUG\tfunction/fn.go:82\trendered\t{\"namespace\": \"bench-0000\", \"name\": \"app0000\", \"ready\": false}",
		"2026-12-02T12:00:03.000Z\tDEBUG\tfunction/fn.go:82\trendered\t{\"namespace\": \"bench-0001\", \"name\": \"app0001\", \"ready\": false}",
		"2026-12-02T12:00:04.000Z\tDEBUG\tfunction/fn.go:82\trendered\t{\"namespace\": \"bench-0000\", \"name\": \"app0000\", \"ready\": true}",
		"2026-12-02T12:00:04.000Z\tINFO\tfunction/fn.go:90\tsomething else\t{\"namespace\": \"bench-0000\"}",
		"2026-12-02T12:00:05.000Z\tDEBUG\tfunction/fn.go:82\trendered\t{\"namespace\": \"other\"}",
	}
	rs := parseRenders(lines)
	if len(rs) != 5 {
		t.Fatalf("parseRenders: %d renders, want 5", len(rs))
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	got := rendersUntil(rs, map[string]time.Time{"bench-0000": at("2026-12-02T12:00:02.5Z"), "bench-0001": at("2026-12-02T12:00:09Z"), "bench-0002": at("2026-12-02T12:00:09Z")})
	if diff := cmp.Diff(map[string]int{"bench-0000": 2, "bench-0001": 1}, got); diff != "" {
		t.Errorf("rendersUntil (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("mean 1.0 (p50 1, p90 1, max 2)", spreadInts(got, 3)); diff != "" {
		t.Errorf("spreadInts (-want +got):\n%s", diff)
	}
	r := &bulkResult{N: 3, RendersOwn: got}
	if diff := cmp.Diff(1.0, r.RendersOwnMean()); diff != "" {
		t.Errorf("RendersOwnMean (-want +got):\n%s", diff)
	}
}

func TestTop(t *testing.T) {
	m := map[string]float64{"GET a": 1, "PUT b": 3, "APPLY c": 3, "LIST d": 0.5}
	if diff := cmp.Diff("7.50 in all, APPLY c 3.00, PUT b 3.00", top(m, 2, 2)); diff != "" {
		t.Errorf("top (-want +got):\n%s", diff)
	}
}
