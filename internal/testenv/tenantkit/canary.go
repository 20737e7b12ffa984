package tenantkit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// Canary asserts that no credential of the run — every tenant password
// (read from the Secrets ESO wrote; at least minTenants of them), the admin
// and superuser credentials, OpenBao's root token — appears in any
// component log of the run's directory (Crossplane core, the functions, ESO,
// OpenBao, PostgreSQL, the garbage collector, and whatever else the suite
// logs there), in extra (name → text: in-process logs, metric scrapes), in
// Events, or in the Tenants, Databases, ExternalSecrets, Usages and configs.
// mustMention is a string the object dump must contain (so the check is
// known to have looked at the objects).
func Canary(ctx context.Context, t testing.TB, e *testenv.Env, minTenants int, extra map[string]string, mustMention string) {
	t.Helper()
	found, err := Leaks(ctx, e, minTenants, extra, mustMention)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// Leaks is Canary for a program: it returns what it found (a credential
// where it must not be, or a check that would prove little), and an error
// when it could not look.
func Leaks(ctx context.Context, e *testenv.Env, minTenants int, extra map[string]string, mustMention string) ([]string, error) {
	var found []string
	secrets := []string{e.Postgres.AdminPassword, e.Postgres.AdminUser, e.Postgres.SuperPassword, e.OpenBao.RootToken}
	sl := &corev1.SecretList{}
	if err := e.Kube.Client.List(ctx, sl); err != nil {
		return nil, err
	}
	tenants := 0
	for _, s := range sl.Items {
		if p := string(s.Data["password"]); p != "" && s.Data["hostaddr"] != nil {
			secrets = append(secrets, p)
			tenants++
		}
	}
	if tenants < minTenants {
		return nil, fmt.Errorf("only %d tenant Secrets to take passwords from, want %d: the check would prove little", tenants, minTenants)
	}
	var dump strings.Builder
	for _, gvk := range [][2]string{
		{TenantAPI, "TenantList"}, {LegacyAPI, "TenantList"}, {LegacyAPI, "XTenantList"}, {TenantAPI, "DatabaseList"},
		{TenantAPI, "DatabaseBindingList"}, {TenantAPI, "ClusterProviderConfigList"}, {TenantAPI, "ProviderConfigUsageList"}, {TenantAPI, "ClusterProviderConfigUsageList"},
		{"external-secrets.io/v1", "ExternalSecretList"}, {"protection.crossplane.io/v1beta1", "UsageList"}, {"v1", "EventList"},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(gvk[0])
		l.SetKind(gvk[1])
		if err := e.Kube.Client.List(ctx, l); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(l)
		dump.Write(b)
	}
	texts := map[string]string{}
	for k, v := range extra {
		texts[k] = v
	}
	files, _ := filepath.Glob(filepath.Join(e.Dir, "*.log"))
	files = append(files, e.Crossplane.LogFile(), e.ESO.LogFile())
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // the run's own logs
		if err != nil {
			return nil, err
		}
		texts[filepath.Base(f)] = string(b)
	}
	if len(texts) < 6 {
		return nil, fmt.Errorf("only %d logs to look at: %v", len(texts), files)
	}
	texts["objects, conditions and Events"] = dump.String()
	for where, text := range texts {
		for _, s := range secrets {
			// PostgreSQL's own log names the roles that connect, as any
			// server's does; it is the admin's, not ours to keep clean.
			if where == "postgres.log" && s == e.Postgres.AdminUser {
				continue
			}
			if strings.Contains(text, s) {
				found = append(found, fmt.Sprintf("%s contains a credential (%.4s…)", where, s))
			}
		}
	}
	if !strings.Contains(dump.String(), mustMention) {
		found = append(found, fmt.Sprintf("the object dump does not mention %q: the check would prove little", mustMention))
	}
	return found, nil
}
