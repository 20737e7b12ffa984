package delivery

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestZZCanary runs last: no credential of the run — the tenants' passwords
// (read from the Secrets ESO wrote), the admin and superuser credentials,
// OpenBao's root token — appears in any component's log (Crossplane core,
// the functions, ESO, OpenBao, PostgreSQL, the garbage collector, the
// provider), in Events, or in the Tenants, Databases, ExternalSecrets and
// Usages (spec, status, conditions).
func TestZZCanary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secrets := []string{env.Postgres.AdminPassword, env.Postgres.AdminUser, env.Postgres.SuperPassword, env.OpenBao.RootToken}
	tenants := 0
	sl := &corev1.SecretList{}
	if err := env.Kube.Client.List(ctx, sl); err != nil {
		t.Fatal(err)
	}
	for _, s := range sl.Items {
		if p := string(s.Data["password"]); p != "" && s.Data["hostaddr"] != nil {
			secrets = append(secrets, p)
			tenants++
		}
	}
	if tenants < 2 {
		t.Fatalf("only %d tenant Secrets to take passwords from: the check would prove little", tenants)
	}
	var dump strings.Builder
	for _, gvk := range [][2]string{
		{tenantAPI, "TenantList"}, {legacyAPI, "TenantList"}, {legacyAPI, "XTenantList"}, {tenantAPI, "DatabaseList"},
		{"external-secrets.io/v1", "ExternalSecretList"}, {"protection.crossplane.io/v1beta1", "UsageList"}, {"v1", "EventList"},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(gvk[0])
		l.SetKind(gvk[1])
		if err := env.Kube.Client.List(ctx, l, &client.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(l)
		dump.Write(b)
	}
	logs := map[string]string{"provider log": providerLogs.String()}
	files, _ := filepath.Glob(filepath.Join(env.Dir, "*.log"))
	for _, f := range append(files, env.Crossplane.LogFile(), env.ESO.LogFile()) {
		b, err := os.ReadFile(f) //nolint:gosec // the run's own logs
		if err != nil {
			t.Fatal(err)
		}
		logs[filepath.Base(f)] = string(b)
	}
	if len(logs) < 6 {
		t.Fatalf("only %d logs to look at: %v", len(logs), files)
	}
	logs["objects, conditions and Events"] = dump.String()
	for where, text := range logs {
		for _, s := range secrets {
			// PostgreSQL's own log names the roles that connect, as any
			// server's does; it is the admin's, not ours to keep clean.
			if where == "postgres.log" && s == env.Postgres.AdminUser {
				continue
			}
			if strings.Contains(text, s) {
				t.Errorf("%s contains a credential (%.4s…)", where, s)
			}
		}
	}
	if !strings.Contains(dump.String(), "shared-shop-postgresql") {
		t.Error("the dump holds no ExternalSecret: the check would prove little")
	}
}
