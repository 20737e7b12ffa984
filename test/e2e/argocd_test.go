package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ddupan.top/provider-postgresql-tenant/cluster/argocd"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// health runs an Argo CD health check on a live object and checks the
// status and that the message names want.
func health(t *testing.T, script, what string, u *unstructured.Unstructured, status string, want ...string) {
	t.Helper()
	got, err := argocd.Run(script, u.Object)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.Status != status {
		t.Errorf("%s: Argo CD health %s, want %s", what, got, status)
	}
	for _, w := range want {
		if !strings.Contains(got.Message, w) {
			t.Errorf("%s: Argo CD health message %q does not name %q", what, got.Message, w)
		}
	}
}

// trace runs the pinned crossplane CLI's resource trace on the env's
// kubeconfig and returns its output.
func trace(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "crossplane"), append([]string{"resource", "trace"}, args...)...)
	// Only the env's kubeconfig; a config file of the CLI's own in a
	// temporary directory, not the user's.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kube.KubeconfigFile, "CROSSPLANE_CONFIG="+filepath.Join(t.TempDir(), "config.yaml"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("crossplane resource trace %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// The Argo CD health checks (cluster/argocd) on real objects: a Ready
// Tenant and its Database are Healthy, a Tenant refused with AlreadyBound
// is Degraded, and the Database its Tenant released (Retain) stays Healthy,
// saying it is Released. The pinned crossplane CLI traces the Tenant to its
// composed resources and the Database.
func TestArgoCDHealthOfRealObjects(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const owner, thief = "argo-owner", "argo-thief"
	tn := tenantkit.NewTenant(ctx, t, env, api, owner, owner, "{instanceRef: shared}")
	db := tenantkit.BoundDatabase(ctx, t, env, owner, owner)
	health(t, argocd.TenantScript, "the Ready Tenant", tn, argocd.Healthy, "Ready", "argo_owner", tenantkit.SecretName(owner))
	health(t, argocd.DatabaseScript, "its Database", db, argocd.Healthy, "bound to the Tenant "+owner+"/"+owner)

	// crossplane resource trace: the Tenant's tree, then the Database (a
	// reference in the binding's status, not a composed resource: the
	// Tenant's tree does not show it, even with -o wide).
	out := trace(ctx, t, "tenant.database.ayatori.ddupan.top/"+owner, "-n", owner)
	t.Logf("crossplane resource trace of the Tenant:\n%s", out)
	for _, w := range []string{"Tenant/" + owner, "DatabaseBinding/" + owner, "ExternalSecret/" + tenantkit.SecretName(owner)} {
		if !strings.Contains(out, w) {
			t.Errorf("the trace of the Tenant does not show %s", w)
		}
	}
	if strings.Contains(out, "Usage/") {
		t.Errorf("the trace of the Tenant shows a Usage: the function composes none")
	}
	out = trace(ctx, t, "database.database.ayatori.ddupan.top/"+db.GetName())
	t.Logf("crossplane resource trace of the Database:\n%s", out)
	if !strings.Contains(out, "Database/"+db.GetName()) || !strings.Contains(out, "Available") {
		t.Errorf("the trace of the Database does not show it Available")
	}

	// A second Tenant naming the bound Database: AlreadyBound, Degraded.
	tenantkit.CreateTenant(ctx, t, env, api, thief, thief, "{databaseRef: "+db.GetName()+"}")
	var refused *unstructured.Unstructured
	waitFor(ctx, t, "AlreadyBound on the Tenant", func() bool {
		u, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", thief, thief)
		refused = u
		return err == nil && str(u, "status", "reason") == "AlreadyBound"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, thief, thief) })
	health(t, argocd.TenantScript, "the refused Tenant", refused, argocd.Degraded, "AlreadyBound", db.GetName())

	// The owner goes; with Retain its Database stays, Released.
	tenantkit.DeleteTenant(ctx, t, env, api, owner, owner)
	var released *unstructured.Unstructured
	waitFor(ctx, t, "the Database Released", func() bool {
		released = getDatabase(ctx, t, db.GetName())
		return str(released, "status", "binding", "phase") == "Released"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, owner, owner) })
	health(t, argocd.DatabaseScript, "the Released Database", released, argocd.Healthy, "Released", owner+"/"+owner)
	tenantkit.DeleteTenant(ctx, t, env, api, thief, thief)
}
