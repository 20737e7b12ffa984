package delivery

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// runbookPatches returns the `kubectl patch databases…` commands of a
// section of docs/admins.md, in the order the section gives them, with
// the whitespace of wrapped lines made one space.
func runbookPatches(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "admins.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/admins.md has no section %q", heading)
	}
	section := doc[i+len(heading)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	if j := strings.Index(section, "\n### "); j >= 0 {
		section = section[:j]
	}
	var cmds []string
	for _, m := range regexp.MustCompile("`(kubectl patch databases[^`]*)`").FindAllStringSubmatch(section, -1) {
		cmds = append(cmds, strings.Join(strings.Fields(m[1]), " "))
	}
	return cmds
}

// kubectlAsWritten runs a documented command with the pinned kubectl as
// the admin, its placeholders replaced; the patch body is the one the doc
// writes, between its single quotes.
func kubectlAsWritten(ctx context.Context, t *testing.T, line string, values map[string]string) {
	t.Helper()
	for k, v := range values {
		line = strings.ReplaceAll(line, k, v)
	}
	if strings.Contains(line, "<") {
		t.Fatalf("a placeholder of the runbook's command is not filled: %s", line)
	}
	head, body, ok := strings.Cut(line, " -p '")
	if !ok || !strings.HasSuffix(body, "'") {
		t.Fatalf("the runbook's command has no -p '<patch>': %s", line)
	}
	args := append(strings.Fields(head)[1:], "-p", strings.TrimSuffix(body, "'"))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(testenv.BinDir(), "kubectl"), args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + env.Kube.KubeconfigFile}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

// The rebind runbook of docs/admins.md, run as an admin reads it: its
// commands taken from the doc, word for word, and run with kubectl, on a
// Database released by one namespace's Tenant and handed to another
// namespace's. The old team's password stops working, the new Tenant binds
// it with a password of its own, and the data stays. A command the doc
// gets wrong fails here: presetting the claim with a merge patch that
// leaves the old Tenant's UID in place kept the Database Released.
func TestRebindRunbookAsWritten(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmds := runbookPatches(t, "## Rebind a Released Database (runbook)")
	find := func(what string, has ...string) string {
		t.Helper()
	next:
		for _, c := range cmds {
			for _, h := range has {
				if !strings.Contains(c, h) {
					continue next
				}
			}
			return c
		}
		t.Fatalf("the runbook has no command to %s (none of %q contains %q)", what, cmds, has)
		return ""
	}
	cleanup := find("remove other access", "accessCleanup")
	rotate := find("rotate and end the old sessions", "credentialRotation", "terminateSessions")
	preset := find("preset the claim for the new Tenant", `"claimRef":{"namespace":"<ns>","name":"<tenant>"`)
	if strings.Contains(preset, "<uid>") {
		t.Fatalf("the first claim command names a uid: not the preset for a new Tenant: %s", preset)
	}

	const oldNS, newNS = "runbook-old", "runbook-new"
	tenantkit.NewTenant(ctx, t, env, tenantAPI, oldNS, oldNS, "{instanceRef: shared}")
	db := databaseOf(ctx, t, tenantAPI, oldNS, oldNS)
	oldPassword := tenantkit.CheckSecretLogsIn(ctx, t, env, oldNS, tenantkit.SecretName(oldNS))
	sec := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: oldNS, Name: tenantkit.SecretName(oldNS)}, sec); err != nil {
		t.Fatal(err)
	}
	dbName, owner := string(sec.Data["database"]), string(sec.Data["username"])
	config := func(password string) *pgx.ConnConfig {
		t.Helper()
		c, err := env.Postgres.ConnConfig(owner, password, dbName)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := config(oldPassword)
	oc, err := pgx.ConnectConfig(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the rebind')`); err != nil {
		t.Fatal(err)
	}
	_ = oc.Close(ctx)

	tenantkit.DeleteTenant(ctx, t, env, tenantAPI, oldNS, oldNS)
	describe := func() string {
		u, _ := tenantkit.Get(context.Background(), env.Kube.Client, tenantAPI, "Database", "", db)
		if u == nil {
			return "no Database"
		}
		return fmt.Sprint(u.Object["spec"], u.Object["status"])
	}
	waitUntil(ctx, t, "the Database Released", func() bool { return bindingPhase(ctx, t, db) == "Released" }, describe)
	status := func(path ...string) string {
		u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
		if err != nil {
			return ""
		}
		s, _, _ := unstructured.NestedString(u.Object, append([]string{"status", "atProvider"}, path...)...)
		return s
	}

	kubectlAsWritten(ctx, t, cleanup, map[string]string{"<name>": db, "<new id>": "runbook-cleanup"})
	waitUntil(ctx, t, "the access cleanup done", func() bool { return status("accessCleanup", "id") == "runbook-cleanup" }, describe)
	kubectlAsWritten(ctx, t, rotate, map[string]string{"<name>": db, "<new id>": "runbook-rotation"})
	waitUntil(ctx, t, "the rotation done", func() bool { return status("credentialRotation", "id") == "runbook-rotation" }, describe)
	if c, err := pgx.ConnectConfig(ctx, old); err == nil {
		_ = c.Close(ctx)
		t.Error("the old team's password still logs in after the runbook's rotation")
	}
	kubectlAsWritten(ctx, t, preset, map[string]string{"<name>": db, "<ns>": newNS, "<tenant>": newNS})

	tenantkit.NewTenant(ctx, t, env, tenantAPI, newNS, newNS, "{databaseRef: "+db+"}")
	got := tenantkit.CheckSecretLogsIn(ctx, t, env, newNS, tenantkit.StaticSecretName(newNS))
	if got == oldPassword {
		t.Error("the new Tenant got the old team's password")
	}
	c, err := pgx.ConnectConfig(ctx, config(got))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background()) //nolint:errcheck // test session
	var v string
	if err := c.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != "before the rebind" {
		t.Errorf("the data written before the rebind: %q, %v", v, err)
	}
}
