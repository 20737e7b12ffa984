// Package monitoring tests what cluster/monitoring ships: the alert rules
// pass promtool's checks and unit tests, the PrometheusRule holds the same
// rules, every metric the rules and the dashboard read is one a running
// provider exports, and a real Prometheus scraping the provider fires an
// alert and resolves it.
package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// dir is cluster/monitoring.
func dir() string { return filepath.Join(testenv.RepoRoot(), "cluster", "monitoring") }

const (
	rulesFile     = "alerts.rules.yaml"
	ruleManifest  = "prometheusrule.yaml"
	dashboardFile = "dashboard.json"
)

// tool is the path of a Prometheus binary (prometheus, promtool); a
// missing one fails the test with the command that installs it.
func tool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs a Prometheus binary")
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is missing: hack/install-prometheus.sh (or make tools) installs it", name)
	}
	return p
}

// The rules file passes `promtool check rules`, and its unit tests
// (*.test.yaml) pass `promtool test rules`; every alert has a unit test
// that expects it to fire.
func TestRulesPassPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	testFiles, err := filepath.Glob(filepath.Join(dir(), "*.test.yaml"))
	if err != nil || len(testFiles) == 0 {
		t.Fatalf("no promtool unit tests in %s (%v)", dir(), err)
	}
	for i, f := range testFiles {
		testFiles[i] = filepath.Base(f)
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, append([]string{"test", "rules"}, testFiles...)} {
		cmd := exec.Command(promtool, args...) //nolint:noctx // promtool on the shipped files
		cmd.Dir = dir()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	tested := map[string]bool{}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	for _, f := range testFiles {
		b, err := os.ReadFile(filepath.Join(dir(), f))
		if err != nil {
			t.Fatal(err)
		}
		tests.Tests = nil
		if err := yaml.Unmarshal(b, &tests); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					tested[a.Alertname] = true
				}
			}
		}
	}
	for _, r := range rules(t).alerts() {
		if !tested[r.Alert] {
			t.Errorf("alert %s has no promtool test that expects it to fire (%s)", r.Alert, strings.Join(testFiles, ", "))
		}
	}
}

// ruleGroups is a Prometheus rule groups file.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func (g ruleGroups) alerts() []rule {
	var rs []rule
	for _, gr := range g.Groups {
		rs = append(rs, gr.Rules...)
	}
	return rs
}

func readYAML(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func rules(t *testing.T) ruleGroups {
	t.Helper()
	var g ruleGroups
	readYAML(t, rulesFile, &g)
	if len(g.alerts()) == 0 {
		t.Fatalf("%s holds no rules", rulesFile)
	}
	return g
}

// The PrometheusRule for prometheus-operator holds exactly the groups of
// the plain rules file.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       ruleGroups     `json:"spec"`
	}
	readYAML(t, ruleManifest, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", ruleManifest, pr.APIVersion, pr.Kind)
	}
	if diff := cmp.Diff(rules(t), pr.Spec); diff != "" {
		t.Errorf("%s differs from %s (-rules file +PrometheusRule):\n%s", ruleManifest, rulesFile, diff)
	}
}

// dashboardQueries are the PromQL expressions of the dashboard: every
// panel's targets and every query variable.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir(), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has a target without a query", p.Title)
			}
			qs = append(qs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			qs = append(qs, v.Definition)
		}
	}
	if len(qs) == 0 {
		t.Fatalf("%s holds no queries", dashboardFile)
	}
	return qs
}

// promqlWords are the PromQL words that look like metric names.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	matchers   = regexp.MustCompile(`\{[^}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames are the metric names a PromQL expression (or a Grafana
// label_values(metric, label) query) reads: identifiers that are not a
// function, a keyword, a label in a matcher or grouping, a string, a
// duration or a number.
func metricNames(expr string) []string {
	if m := regexp.MustCompile(`^\s*label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	s := quoted.ReplaceAllString(expr, " ")
	s = matchers.ReplaceAllString(s, " ")
	s = ranges.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	var names []string
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		w := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // the unit of a duration or the exponent of a number
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		if promqlWords[strings.ToLower(w)] || seen[w] {
			continue
		}
		seen[w] = true
		names = append(names, w)
	}
	sort.Strings(names)
	return names
}

func TestMetricNames(t *testing.T) {
	cases := map[string]struct {
		expr string
		want []string
	}{
		"Plain":     {expr: "up", want: []string{"up"}},
		"Aggregate": {expr: "max by (config) (provider_x) == 0", want: []string{"provider_x"}},
		"Matchers":  {expr: `sum(rate(a_total{result="refused", kind=~"x|y"}[10m])) > 0`, want: []string{"a_total"}},
		"Histogram": {expr: `histogram_quantile(0.99, sum by (controller, le) (rate(h_bucket{job=~"$job"}[$__rate_interval])))`, want: []string{"h_bucket"}},
		"Binary":    {expr: "a - on (gvk) group_left b offset 5m > 1e3", want: []string{"a", "b"}},
		"Absent":    {expr: "absent(g)", want: []string{"g"}},
		"Variable":  {expr: "label_values(r, job)", want: []string{"r"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, metricNames(tc.expr)); diff != "" {
				t.Errorf("metricNames(%q): -want +got:\n%s", tc.expr, diff)
			}
		})
	}
}

// otherExporters are metrics a rule reads from another exporter, each only
// to silence an alert (kube-state-metrics' Deployment replicas: the
// provider scaled to zero is not absent); a Prometheus without them alerts
// as if they said nothing.
var otherExporters = map[string]bool{"kube_deployment_spec_replicas": true}

// usedMetrics maps every metric name the rules and the dashboard read to
// where it is read (the provider's own metrics and those of the runtime it
// embeds; not otherExporters).
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	for _, r := range rules(t).alerts() {
		for _, n := range metricNames(r.Expr) {
			if otherExporters[n] {
				continue
			}
			used[n] = append(used[n], "alert "+r.Alert)
		}
	}
	for _, q := range dashboardQueries(t) {
		for _, n := range metricNames(q) {
			used[n] = append(used[n], "dashboard "+q)
		}
	}
	return used
}

// exported are the sample names of a /metrics page (a histogram's
// _bucket, _sum and _count each, as PromQL reads them).
func exported(page string) map[string]bool {
	names := map[string]bool{}
	for _, l := range strings.Split(page, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 {
			names[l[:i]] = true
		}
	}
	return names
}

// missing lists the used metrics a /metrics page does not export.
func missing(used map[string][]string, page string) []string {
	have := exported(page)
	var out []string
	for n, where := range used {
		if !have[n] {
			out = append(out, fmt.Sprintf("%s (read by %s)", n, strings.Join(where, "; ")))
		}
	}
	sort.Strings(out)
	return out
}

// ctxT is a context bound to the test's deadline.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d)
	}
	t.Cleanup(cancel)
	return ctx
}

// The ConfigMap for the Grafana sidecar holds exactly dashboard.json,
// under the label the sidecar loads.
func TestDashboardConfigMapIsTheDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir(), "dashboard-configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Labels["grafana_dashboard"] != "1" || len(cm.Data) != 1 {
		t.Fatalf("dashboard-configmap.yaml: kind %q, labels %v, %d data keys; want a ConfigMap labelled grafana_dashboard: \"1\" with one dashboard", cm.Kind, cm.Metadata.Labels, len(cm.Data))
	}
	file, err := os.ReadFile(filepath.Join(dir(), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(file, &want); err != nil {
		t.Fatal(err)
	}
	for _, v := range cm.Data {
		if err := json.Unmarshal([]byte(v), &got); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("dashboard-configmap.yaml differs from %s (make generate):\n%s", dashboardFile, d)
	}
}

// The dashboard loads where Grafana provisions it (the sidecar, which does
// not substitute import inputs) as well as by import: it declares no
// __inputs, and every panel and query reads the data source of its
// `datasource` variable.
func TestDashboardReadsItsDataSourceVariable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir(), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if _, ok := d["__inputs"]; ok {
		t.Error("the dashboard declares __inputs, which a provisioned dashboard leaves unresolved")
	}
	var walk func(path string, v any)
	n := 0
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ds, ok := x["datasource"].(map[string]any); ok {
				n++
				if ds["uid"] != "${datasource}" {
					t.Errorf("%s: datasource %v, want the ${datasource} variable", path, ds)
				}
			}
			for k, c := range x {
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("dashboard", d)
	if n < 10 {
		t.Fatalf("found %d data source references; the walk is broken", n)
	}
}
