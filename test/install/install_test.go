// Package install is the install drill: it installs the product on the test
// node from docs/install.md alone, as a platform admin would on a cluster
// that has only Crossplane core, the External Secrets Operator, a fresh
// OpenBao (initialised and unsealed, nothing enabled) and a PostgreSQL
// server; then an app team follows docs/app-teams.md to a Tenant whose
// Secret logs in.
//
// The guide's command blocks are the drill: the `sh` blocks run in order in
// one bash, the `sql` blocks with psql as the superuser, the named `hcl`
// blocks are saved under their names, as the guide tells the admin. The
// harness does nothing the guide covers: it pushes no package, writes no
// ImageConfig, configures nothing in OpenBao, creates no role, store or
// Provider.
//
// Where the test node differs from a real cluster is said once, in
// drillSettings: the values of the guide's first block (a loopback
// registry, the node's addresses, the test CA) and the admin's own access
// (kubeconfig, OpenBao token, superuser login), which the guide takes as
// given.
package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.NodeMain(m, testenv.Options{Postgres: true, OpenBao: true, Kube: true, ESO: true, Crossplane: true, Node: true, InstallDrill: true}, &env)
}

// block is one fenced block of a doc.
type block struct {
	lang, name, body string
	line             int
}

var fence = regexp.MustCompile("^```([a-z]*) ?([a-z0-9-]*)$")

// blocks returns the fenced blocks of docs/<doc>, in order.
func blocks(t *testing.T, doc string) []block {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	for i, l := range strings.Split(string(b), "\n") {
		if cur != nil {
			if l == "```" {
				out = append(out, *cur)
				cur = nil
				continue
			}
			cur.body += l + "\n"
			continue
		}
		if m := fence.FindStringSubmatch(l); m != nil {
			cur = &block{lang: m[1], name: m[2], line: i + 1}
		}
	}
	if cur != nil {
		t.Fatalf("docs/%s: the block at line %d is not closed", doc, cur.line)
	}
	return out
}

// drillSettings are the values the drill gives the guide's settings block:
// where the test node differs from a cluster. The registry is a loopback
// registry under a prefix the packages' metadata does not name; OpenBao is
// reached at the example's cluster DNS name (the node resolves it to a
// Service in front of the test's OpenBao); PostgreSQL at the node's
// address, by the name in its certificate.
func drillSettings(work string) map[string]string {
	return map[string]string{
		"REGISTRY":     env.Crossplane.RegistryAddress() + "/acme/platform",
		"VERSION":      "v0.3.1",
		"OPENBAO_ADDR": env.OpenBao.ServiceAddress,
		"CA_BUNDLE":    filepath.Join(work, "ca.crt"),
		"PG_HOST":      env.Postgres.Host,
		"PG_HOSTADDR":  env.Postgres.PodHostaddr,
		"PG_PORT":      fmt.Sprint(env.Postgres.Port),
	}
}

// adminAccess is the admin's own access, which the guide takes as given:
// kubectl's kubeconfig, the bao CLI's address and token, psql's superuser
// login; the CLIs on PATH (kubectl, crossplane and bao from the component
// cache, psql from the PostgreSQL client).
func adminAccess(t *testing.T, work string) []string {
	t.Helper()
	psql, err := testenv.PostgresClientBinDir()
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"PATH=" + env.BinDir + ":" + psql + ":" + os.Getenv("PATH"),
		"HOME=" + work,
		"KUBECONFIG=" + env.Kube.KubeconfigFile,
		"BAO_ADDR=" + env.OpenBao.Address,
		"BAO_CACERT=" + env.CA.CertFile,
		"BAO_TOKEN=" + env.OpenBao.RootToken,
		"PGHOST=" + env.Postgres.Hostaddr,
		fmt.Sprintf("PGPORT=%d", env.Postgres.Port),
		"PGUSER=" + env.Postgres.SuperUser,
		"PGPASSWORD=" + env.Postgres.SuperPassword,
		"PGDATABASE=postgres",
		"PGSSLMODE=verify-full",
		"PGSSLROOTCERT=" + env.CA.CertFile,
	}
}

var assignment = regexp.MustCompile(`^([A-Z_]+)=`)

// checkout makes work what an admin has: a checkout's examples/,
// package/rbac/ and cluster/admission/, and _output/ as `make build` leaves
// it (this machine's platform).
func checkout(t *testing.T, work string) {
	t.Helper()
	for _, d := range []string{"examples", "package/rbac", "cluster/admission"} {
		if err := os.MkdirAll(filepath.Join(work, filepath.Dir(d)), 0o750); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(t.Context(), "cp", "-r", filepath.Join(testenv.RepoRoot(), d), filepath.Join(work, d)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", d, err, out)
		}
	}
	out := filepath.Join(work, "_output")
	if err := os.MkdirAll(out, 0o750); err != nil {
		t.Fatal(err)
	}
	arch := runtime.GOARCH
	for src, dst := range map[string]string{
		"provider-postgresql-tenant.xpkg":      "provider-postgresql-tenant-linux-" + arch + ".xpkg",
		"function-postgresql-tenant.xpkg":      "function-postgresql-tenant-linux-" + arch + ".xpkg",
		"configuration-postgresql-tenant.xpkg": "configuration-postgresql-tenant.xpkg",
	} {
		if err := os.Symlink(filepath.Join(env.PackagesDir, src), filepath.Join(out, dst)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "ca.crt"), env.CA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// script is the guide as one bash script: the drill's settings in place of
// the settings block, then every sh block, and psql for every sql block
// (reading the admin role's password twice, as \password asks, from its
// own file). Each block is announced by its line in the guide.
func script(t *testing.T, work string, bs []block, settings map[string]string) string {
	t.Helper()
	var s strings.Builder
	s.WriteString("set -euo pipefail\n")
	if len(bs) == 0 || bs[0].lang != "sh" || bs[0].name != "settings" {
		t.Fatal("docs/install.md's first block is not the settings block (```sh settings)")
	}
	var names []string
	for _, l := range strings.Split(bs[0].body, "\n") {
		if m := assignment.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
		}
	}
	var have []string
	for k := range settings {
		have = append(have, k)
	}
	slices.Sort(names)
	slices.Sort(have)
	if d := cmp.Diff(names, have); d != "" {
		t.Fatalf("the guide's settings (-) and the drill's (+) differ:\n%s", d)
	}
	for _, k := range have {
		fmt.Fprintf(&s, "%s=%q\n", k, settings[k])
	}
	ran := 0
	for i, b := range bs[1:] {
		switch b.lang {
		case "hcl":
			if b.name == "" {
				t.Fatalf("docs/install.md line %d: an hcl block without a name (the file the admin saves it as)", b.line)
			}
			if err := os.WriteFile(filepath.Join(work, b.name+".hcl"), []byte(b.body), 0o600); err != nil {
				t.Fatal(err)
			}
		case "sh":
			fmt.Fprintf(&s, "echo '### docs/install.md line %d'\n%s", b.line, b.body)
			ran++
		case "sql":
			f := fmt.Sprintf("block-%d.sql", i)
			if err := os.WriteFile(filepath.Join(work, f), []byte(b.body), 0o600); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&s, "echo '### docs/install.md line %d (psql)'\npsql -X -v ON_ERROR_STOP=1 -f %s < admin-password-twice\n", b.line, f)
			ran++
		}
	}
	if ran < 10 {
		t.Fatalf("docs/install.md has %d sh and sql blocks after the settings; want the whole install", ran)
	}
	return s.String()
}

// The install guide, run as written on a cluster nobody prepared, reaches
// a Ready Tenant; the app team's Tenant, as app-teams.md writes it, gets a
// Secret that logs in.
func TestInstallFromTheGuide(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	work := t.TempDir()
	checkout(t, work)
	password := testenv.RandomSecret("drill-")
	if err := os.WriteFile(filepath.Join(work, "admin-password-twice"), []byte(password+"\n"+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := script(t, work, blocks(t, "install.md"), drillSettings(work))
	if err := os.WriteFile(filepath.Join(work, "install.sh"), []byte(sh), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(work, "install.log")
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "install.sh")
	cmd.Dir = work
	cmd.Env = adminAccess(t, work)
	// The admin types the password once more for step 6's read; with no
	// terminal (a session of its own), psql's \password reads stdin.
	cmd.Stdin = strings.NewReader(password + "\n")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	t0 := time.Now()
	err = cmd.Run()
	_ = log.Close()
	out, _ := os.ReadFile(logFile)
	secrets := map[string]string{"the admin role's password": password, "the OpenBao root token": env.OpenBao.RootToken, "the superuser's password": env.Postgres.SuperPassword}
	// Nothing the admin typed or holds is in the run's output; what is
	// shown is redacted all the same.
	shown := string(out)
	for what, s := range secrets {
		if strings.Contains(shown, s) {
			t.Errorf("the guide's output shows %s", what)
			shown = strings.ReplaceAll(shown, s, "<"+what+">")
		}
	}
	if err != nil {
		// What the package manager and the provider say, as an admin
		// would look.
		look := exec.CommandContext(context.Background(), filepath.Join(env.BinDir, "kubectl"), "get", "-A", "-o", "wide",
			"providers.pkg.crossplane.io,functions.pkg.crossplane.io,configurations.pkg.crossplane.io,providerrevisions.pkg.crossplane.io,pods,clusterproviderconfigs.database.ayatori.ddupan.top")
		look.Env = cmd.Env
		state, _ := look.CombinedOutput()
		t.Fatalf("the guide failed after %s: %v\n%s\nthe cluster:\n%s\ncrossplane log:\n%s", time.Since(t0).Round(time.Second), err, lastBlock(shown), state, testenv.Tail(env.Crossplane.LogFile(), 15))
	}
	t.Logf("the guide ran in %s:\n%s", time.Since(t0).Round(time.Second), shown)
	// The guide's packages are installed and their roles made: Crossplane's
	// RBAC manager has nothing left to do here, and it holds a port and a
	// lock every other test environment on the machine waits for.
	env.Crossplane.StopRBACManager()

	// The admin's first Tenant.
	tenantkit.CheckSecretLogsIn(ctx, t, env, "wiki", "shared-wiki-postgresql")

	// The app team's Tenant, as app-teams.md writes it, in the namespace
	// the guide prepared.
	var tenant *unstructured.Unstructured
	for _, b := range blocks(t, "app-teams.md") {
		if b.lang == "yaml" && strings.Contains(b.body, "kind: Tenant") {
			tenant = &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(b.body), &tenant.Object); err != nil {
				t.Fatalf("docs/app-teams.md line %d: %v", b.line, err)
			}
			break
		}
	}
	if tenant == nil {
		t.Fatal("docs/app-teams.md has no Tenant")
	}
	// As a person of the team, with only what the guide granted it.
	team, err := env.Kube.UserClient("alice", "my-team")
	if err != nil {
		t.Fatal(err)
	}
	if err := team.Create(ctx, tenant); err != nil {
		t.Fatalf("the app team cannot create its Tenant: %v", err)
	}
	ready := tenantkit.WaitTenantReady(ctx, t, env, tenant.GetAPIVersion(), tenant.GetNamespace(), tenant.GetName())
	secret, _, _ := unstructured.NestedString(ready.Object, "status", "credential", "secretRef", "name")
	if err := team.Get(ctx, client.ObjectKey{Namespace: tenant.GetNamespace(), Name: secret}, &corev1.Secret{}); err != nil {
		t.Errorf("the app team cannot read its Secret: %v", err)
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, tenant.GetNamespace(), secret)
	// Its data roles' Secrets too, through the reader policy the guide
	// wrote.
	roles, _, _ := unstructured.NestedSlice(ready.Object, "status", "dataRoles")
	if want, _, _ := unstructured.NestedSlice(tenant.Object, "spec", "dataRoles"); len(roles) != len(want) || len(want) == 0 {
		t.Fatalf("status.dataRoles %v; want one entry per spec.dataRoles entry (%d), and the guide's Tenant has some", roles, len(want))
	}
	for _, r := range roles {
		name, _, _ := unstructured.NestedString(r.(map[string]any), "secretRef", "name")
		if err := team.Get(ctx, client.ObjectKey{Namespace: tenant.GetNamespace(), Name: name}, &corev1.Secret{}); err != nil {
			t.Errorf("the app team cannot read its data role's Secret: %v", err)
		}
		tenantkit.CheckSecretLogsIn(ctx, t, env, tenant.GetNamespace(), name)
	}
}

// lastBlock is the output from the last block announced on.
func lastBlock(out string) string {
	i := strings.LastIndex(out, "### docs/install.md")
	if i < 0 {
		return out
	}
	return out[i:]
}
