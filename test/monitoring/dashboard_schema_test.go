package monitoring

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// schemaErrors decodes a dashboard strictly against Grafana's dashboard
// schema, with the schemas of the built-in panels and the Prometheus query
// registered: a missing required field, a field of the wrong type and an
// unknown field are errors. It returns them, one per line.
func schemaErrors(raw []byte) []string {
	plugins.RegisterDefaultPlugins()
	// The classic JSON model, which import and the Grafana sidecar take
	// (the v2 schema is another document).
	var d dashboard.Dashboard //nolint:staticcheck // see above
	var out []string
	if err := d.UnmarshalJSONStrict(raw); err != nil {
		// The decoder returns its (possibly empty) list of errors.
		var list cog.BuildErrors
		if !errors.As(err, &list) {
			return []string{err.Error()}
		}
		for _, e := range list {
			out = append(out, e.Error())
		}
	}
	if err := d.Validate(); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// No Grafana runs here (its server is AGPL-licensed, which this project
// does not take in), so the dashboard is checked against the schema Grafana
// publishes for it, through its foundation SDK: every field of the
// dashboard, its variables, panels, panel options and Prometheus queries is
// one the schema knows, of its type, and none it requires is missing. The
// check is shown to refuse each kind of mistake on a copy.
func TestDashboardMatchesGrafanasSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(dir(), dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if errs := schemaErrors(raw); len(errs) > 0 {
		t.Fatalf("%s does not match Grafana's dashboard schema:\n%s", dashboardFile, strings.Join(errs, "\n"))
	}

	for _, tc := range []struct {
		name   string
		mutate func(d map[string]any)
		want   string
	}{
		{"an unknown dashboard field", func(d map[string]any) { d["refreshInterval"] = "30s" }, "unexpected field 'refreshInterval'"},
		{"a required field missing", func(d map[string]any) { delete(d, "annotations") }, "annotations: required field is missing"},
		{"a panel option of the wrong type", func(d map[string]any) {
			panel(t, d, "timeseries")["options"].(map[string]any)["legend"] = "bottom"
		}, "options"},
		{"an unknown stat option", func(d map[string]any) {
			panel(t, d, "stat")["options"].(map[string]any)["sparkline"] = true
		}, "unexpected field 'sparkline'"},
		{"a Prometheus query field of the wrong type", func(d map[string]any) {
			targets := panel(t, d, "timeseries")["targets"].([]any)
			targets[0].(map[string]any)["expr"] = 42
		}, "expr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			tc.mutate(d)
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			errs := strings.Join(schemaErrors(b), "\n")
			if !strings.Contains(errs, tc.want) {
				t.Errorf("a dashboard with %s: errors %q, want one containing %q", tc.name, errs, tc.want)
			}
		})
	}
}

// panel returns the first panel of type kind of the decoded dashboard d.
func panel(t *testing.T, d map[string]any, kind string) map[string]any {
	t.Helper()
	for _, p := range d["panels"].([]any) {
		if m := p.(map[string]any); m["type"] == kind {
			return m
		}
	}
	t.Fatalf("the dashboard has no %s panel", kind)
	return nil
}
