// Package upgrade upgrades the provider, its composition function and the
// Configuration the way users do, on the test node with Crossplane core's
// default (Deployment) package runtime: the packages of an earlier commit
// of this repository are installed, Tenants are made (dynamic, static and
// one Released), then this tree's packages are published as a later
// version and each package object's spec.package is edited to it (the
// provider first, then the function, then the Configuration), and back
// again for the rollback. Throughout, no Tenant may leave Ready for longer
// than notReadyBound, and an app logging in with a data role's Secret
// (re-read every second) sees no refused login; after each step no
// password has changed, no database or role was made again or dropped,
// and the Released Database is still Released.
package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// from is the earlier commit users upgrade from: the last release before
// a data role logged in through two login members that take turns, so
// the drill also shows a data role made by it moving to its first member
// with no app's login refused (and still logging in after the rollback,
// where that release gives the data role's own role its login back).
const from = "30d493cdd62d78ead758bf490791e9ff5ade7a99"

// next is the version this tree's packages are published as; the earlier
// commit's are testenv.PackageTestVersion.
const next = "v0.2.0"

// notReadyBound is the longest any Tenant may be not Ready during an
// upgrade or a rollback. The provider's Pod is replaced, the function's Pod
// too, and core re-renders every Tenant with the new Composition; none of
// that should take a Tenant's Secret away, and its Ready condition only
// follows what its binding and ExternalSecret report.
const notReadyBound = 30 * time.Second

const leaseName = "crossplane-leader-election-provider-postgresql-tenant"

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.NodeMain(m, testenv.Options{
		Postgres: true, OpenBao: true, Kube: true, ESO: true, Crossplane: true,
		Node: true, NodeConfiguration: true, NodeUpgradeFrom: from,
	}, &env, func(e *testenv.Env) (func(), error) {
		return func() {}, tenantkit.Platform(context.Background(), e)
	})
}

// tenantState is what must not change across an upgrade, per Tenant.
type tenantState struct {
	ns, name, secret string
	database         string
	// passwordHash is the SHA-256 of the Secret's password (never the
	// password itself: it would reach the test output in a diff).
	passwordHash string
	recordVer    int
	dbOID, role  uint32
}

func TestUpgradeAndRollback(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	api := tenantkit.TenantAPI

	// Before: Tenants as users have them with the earlier packages.
	tenantkit.NewTenant(ctx, t, env, api, "up-dyn", "up-dyn", "{instanceRef: "+tenantkit.Instance+"}")
	reserve(ctx, t, "up-static-db", "up_static", "up-static", "up-static")
	tenantkit.NewTenant(ctx, t, env, api, "up-static", "up-static", "{databaseRef: up-static-db}")
	tenantkit.NewTenant(ctx, t, env, api, "up-gone", "up-gone", "{instanceRef: "+tenantkit.Instance+"}")
	released := tenantkit.DatabaseName(ctx, env, "up-gone", "up-gone")
	tenantkit.DeleteTenant(ctx, t, env, api, "up-gone", "up-gone")
	waitFor(ctx, t, "the Database of the deleted Tenant is Released", 2*time.Minute, func() error {
		return isReleased(ctx, released)
	})
	tenantkit.NewTenant(ctx, t, env, api, "up-roles", "up-roles", "{instanceRef: "+tenantkit.Instance+", dataRoles: [{name: app, access: readWrite}]}")
	rolesDB := tenantkit.BoundDatabase(ctx, t, env, "up-roles", "up-roles")
	group, _, _ := unstructured.NestedString(rolesDB.Object, "spec", "forProvider", "database")
	group += "_app"
	appSecret := tenantkit.SecretName("up-roles") + "-app"
	if u, _ := secretLogin(ctx, t, "up-roles", appSecret); u != group {
		t.Fatalf("the earlier packages' data role logs in as %q, want its own role %q: is %s the release before login members?", u, group, from[:7])
	}
	app := startSecretApp(ctx, t, "up-roles", appSecret)
	before := []tenantState{
		state(ctx, t, "up-dyn", "up-dyn", tenantkit.SecretName("up-dyn")),
		state(ctx, t, "up-static", "up-static", tenantkit.StaticSecretName("up-static")),
		state(ctx, t, "up-roles", "up-roles", tenantkit.SecretName("up-roles")),
	}
	oldPod := providerPod(ctx, t)
	holder(ctx, t, oldPod)

	newDir, err := testenv.PackagesDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Crossplane.PublishPackages(ctx, env, newDir, next); err != nil {
		t.Fatal(err)
	}

	step := func(what, version string, order []pkg) {
		t.Helper()
		w := watchReady(ctx, before)
		// Crossplane's RBAC manager makes the new revisions' roles. It
		// runs only while the revisions change: it holds a port and a
		// lock that every other test environment on the machine waits
		// for.
		if err := env.Crossplane.StartRBACManager(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range order {
			upgradeTo(ctx, t, p, version)
		}
		rev, _, err := revisions(ctx, provider.revisionKind, provider.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Crossplane.AwaitProviderRBAC(ctx, env.Kube, rev); err != nil {
			t.Fatal(err)
		}
		env.Crossplane.StopRBACManager()
		newPod := providerPod(ctx, t)
		holder(ctx, t, newPod)
		// The runbook: once the old function Pod is gone, restart core so
		// that it dials the new one. Core keeps one connection to a
		// function, without keepalives; a connection to a Pod that went
		// away mid-request can stay open (unacknowledged, retransmitting)
		// and hang every render until the kernel gives up on it, minutes
		// later.
		packagePod(ctx, t, function)
		if err := env.Crossplane.RestartCore(ctx); err != nil {
			t.Fatal(err)
		}
		// Crossplane renders a Tenant when it or what it composes changes,
		// or at its sync interval (an hour): a new function alone renders
		// nothing. The runbook's command renders every Tenant at once.
		rerender(ctx, t, what)
		// Let core render every Tenant with the new function and the
		// provider poll each binding before the Tenants are judged.
		time.Sleep(20 * time.Second)
		for _, s := range before {
			tenantkit.WaitTenantReady(ctx, t, env, api, s.ns, s.name)
			// Ready is what the Tenant last composed; Synced says core
			// renders it now (a render that cannot reach the function
			// leaves Ready as it was).
			waitFor(ctx, t, what+": Tenant "+s.ns+"/"+s.name+" Synced", 2*time.Minute, func() error {
				return synced(ctx, s.ns, s.name)
			})
		}
		longest, who, why := w.stop()
		t.Logf("%s: the provider Pod %s replaced by %s; the longest a Tenant was not Ready: %s (%s)", what, oldPod, newPod, longest.Round(time.Millisecond), who)
		if longest > notReadyBound {
			t.Errorf("%s: Tenant %s was not Ready for %s, want at most %s; it showed:\n%s", what, who, longest.Round(time.Millisecond), notReadyBound, strings.Join(why, "\n"))
		}
		for _, b := range before {
			a := state(ctx, t, b.ns, b.name, b.secret)
			unchanged(t, what, b, a)
		}
		if err := isReleased(ctx, released); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		oldPod = newPod
	}

	// Upgrade: the provider, then the function, then the Configuration.
	_, pwBefore := secretLogin(ctx, t, "up-roles", appSecret)
	step("upgrade", next, []pkg{provider, function, configuration})
	// The data role made by the earlier release moved to its first member,
	// with its password; its own role keeps logging in for the grace.
	member := group + "_1"
	waitFor(ctx, t, "the data role's Secret names its member "+member, 2*time.Minute, func() error {
		if u, _ := secretLogin(ctx, t, "up-roles", appSecret); u != member {
			return fmt.Errorf("the Secret names %q", u)
		}
		return nil
	})
	if _, pw := secretLogin(ctx, t, "up-roles", appSecret); pw != pwBefore {
		t.Error("the data role's password changed when it moved to its member")
	}
	waitFor(ctx, t, "the Database shows "+group+" in its grace", time.Minute, func() error {
		d, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Database", "", rolesDB.GetName())
		if err != nil {
			return err
		}
		roles, _, _ := unstructured.NestedSlice(d.Object, "status", "atProvider", "dataRoles")
		if len(roles) != 1 || roles[0].(map[string]any)["previousLogin"] != group || roles[0].(map[string]any)["loginRole"] != member {
			return fmt.Errorf("status.atProvider.dataRoles = %v", roles)
		}
		return nil
	})

	// Rollback, in the reverse order.
	step("rollback", testenv.PackageTestVersion, []pkg{configuration, function, provider})
	tries, refused := app.stop()
	t.Logf("an app logging in with the data role's Secret through the upgrade and the rollback: %d logins, %d refused", tries, refused)
	if refused != 0 || tries < 100 {
		t.Errorf("the app's logins with the data role's Secret: %d refused of %d; want none refused", refused, tries)
	}
}

// secretLogin is the username and password of the Secret ns/name.
func secretLogin(ctx context.Context, t *testing.T, ns, name string) (string, string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data["username"]), string(s.Data["password"])
}

// secretApp is an app that reads its Secret every second (a mounted
// Secret refreshed promptly) and opens a new connection with what it read
// every 200 ms, counting the logins refused.
type secretApp struct {
	cancel         context.CancelFunc
	done           chan struct{}
	tries, refused int
}

func startSecretApp(ctx context.Context, t *testing.T, ns, secret string) *secretApp {
	ctx, cancel := context.WithCancel(ctx)
	a := &secretApp{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		var data map[string][]byte
		var read time.Time
		for ctx.Err() == nil {
			if time.Since(read) >= time.Second {
				s := &corev1.Secret{}
				if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, s); err == nil {
					data, read = s.Data, time.Now()
				}
			}
			cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=%s sslrootcert=%s",
				data["host"], data["port"], data["database"], data["username"], data["sslmode"], env.CA.CertFile))
			if err != nil {
				t.Errorf("the data role's Secret does not make a connection string: %v", err)
				return
			}
			cfg.Password = string(data["password"])
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := pgx.ConnectConfig(cctx, cfg)
			ccancel()
			switch {
			case err == nil:
				a.tries++
				_ = c.Close(ctx)
			case ctx.Err() == nil:
				a.tries++
				if a.refused++; a.refused <= 3 {
					t.Logf("the app's login as %q was refused: %v", data["username"], err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return a
}

func (a *secretApp) stop() (int, int) {
	a.cancel()
	<-a.done
	return a.tries, a.refused
}

// pkg is a package object users edit to upgrade.
type pkg struct {
	kind, name, repo, revisionKind string
}

var (
	provider      = pkg{"Provider", testenv.ProviderName, testenv.ProviderPackageName, "ProviderRevision"}
	function      = pkg{"Function", "ddupan-function-postgresql-tenant", "xpkg.crossplane.io/ddupan/function-postgresql-tenant", "FunctionRevision"}
	configuration = pkg{"Configuration", testenv.ConfigurationName, testenv.ConfigurationPackageName, "ConfigurationRevision"}
)

// upgradeTo sets p's spec.package to version and waits until p reports
// that package as its current one, Installed and Healthy, with its current
// revision the only active one and healthy.
func upgradeTo(ctx context.Context, t *testing.T, p pkg, version string) {
	t.Helper()
	ref := p.repo + ":" + version
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("pkg.crossplane.io/v1")
	o.SetKind(p.kind)
	o.SetName(p.name)
	// Crossplane's package manager writes it too: the edit is made again
	// on a conflict.
	testenv.Edit(t, env.Kube.Client, o, func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, ref, "spec", "package")
	})
	defer func() {
		if t.Failed() {
			t.Logf("after %s %s to %s:\n%s", p.kind, p.name, version, packageState(ctx, p))
		}
	}()
	waitFor(ctx, t, fmt.Sprintf("%s %s at %s, its revision active and healthy", p.kind, p.name, version), 4*time.Minute, func() error {
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: p.name}, o); err != nil {
			return err
		}
		id, _, _ := unstructured.NestedString(o.Object, "status", "currentIdentifier")
		cur, _, _ := unstructured.NestedString(o.Object, "status", "currentRevision")
		if !strings.HasSuffix(id, ":"+version) {
			return fmt.Errorf("current package %q", id)
		}
		for _, c := range []string{"Installed", "Healthy"} {
			if s, r, m := tenantkit.Condition(o, c); s != "True" {
				return fmt.Errorf("%s %s: %s %s", c, s, r, m)
			}
		}
		active, _, err := revisions(ctx, p.revisionKind, p.name)
		if err != nil {
			return err
		}
		if active != cur {
			return fmt.Errorf("active revision %s, current %s", active, cur)
		}
		r := &unstructured.Unstructured{}
		r.SetAPIVersion("pkg.crossplane.io/v1")
		r.SetKind(p.revisionKind)
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: cur}, r); err != nil {
			return err
		}
		return revisionHealthy(r)
	})
}

// rerenderCommand is the runbook's command (docs/operations.md) that has
// Crossplane render every Tenant now: any change to a Tenant renders it.
var rerenderCommand = []string{"annotate", "tenants.database.ayatori.ddupan.top", "--all-namespaces", "--all", "--overwrite"}

const rerenderAnnotation = "ayatori.ddupan.top/rendered-after-upgrade"

// rerender runs the runbook's command with kubectl.
func rerender(ctx context.Context, t *testing.T, stamp string) {
	t.Helper()
	args := append([]string{"--kubeconfig=" + env.Kube.KubeconfigFile}, rerenderCommand...)
	args = append(args, rerenderAnnotation+"="+stamp)
	out, err := exec.CommandContext(ctx, filepath.Join(env.BinDir, "kubectl"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args[1:], " "), err, out)
	}
}

// revisionHealthy is nil when a package revision reports RevisionHealthy
// True and every other health condition it has (RuntimeHealthy for a
// provider or function) True as well.
func revisionHealthy(r *unstructured.Unstructured) error {
	if s, reason, m := tenantkit.Condition(r, "RevisionHealthy"); s != "True" {
		return fmt.Errorf("revision %s RevisionHealthy %q: %s %s", r.GetName(), s, reason, m)
	}
	conds, _, _ := unstructured.NestedSlice(r.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		if st, _ := m["status"].(string); strings.HasSuffix(typ, "Healthy") && st != "True" {
			return fmt.Errorf("revision %s %s %s: %v %v", r.GetName(), typ, st, m["reason"], m["message"])
		}
	}
	return nil
}

// providerPod waits for the one Ready Pod of the provider's active
// revision, with no Pod of its other revisions left, and returns its name.
func providerPod(ctx context.Context, t *testing.T) string {
	t.Helper()
	return packagePod(ctx, t, provider)
}

// packagePod waits for the one Ready Pod of p's active revision, with no
// Pod of its other revisions left, and returns its name.
func packagePod(ctx context.Context, t *testing.T, p pkg) string {
	t.Helper()
	var name string
	waitFor(ctx, t, "one Ready "+p.kind+" Pod, of the active revision", 4*time.Minute, func() error {
		active, all, err := revisions(ctx, p.revisionKind, p.name)
		if err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := env.Kube.Client.List(ctx, pods, client.InNamespace(testenv.CrossplaneNamespace)); err != nil {
			return err
		}
		var ready []string
		for _, p := range pods.Items {
			rev := p.Labels["pkg.crossplane.io/revision"]
			switch {
			case !all[rev]:
				continue
			case rev != active:
				return fmt.Errorf("pod %s of the inactive revision %s is still there (%s)", p.Name, rev, p.Status.Phase)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready = append(ready, p.Name)
				}
			}
		}
		if len(ready) != 1 {
			return fmt.Errorf("ready pods of revision %s: %v", active, ready)
		}
		name = ready[0]
		return nil
	})
	return name
}

// revisions returns the active revision of package pkgName and the names
// of all its revisions.
func revisions(ctx context.Context, kind, pkgName string) (string, map[string]bool, error) {
	revs := &unstructured.UnstructuredList{}
	revs.SetAPIVersion("pkg.crossplane.io/v1")
	revs.SetKind(kind + "List")
	if err := env.Kube.Client.List(ctx, revs, client.MatchingLabels{"pkg.crossplane.io/package": pkgName}); err != nil {
		return "", nil, err
	}
	var active []string
	all := map[string]bool{}
	for _, r := range revs.Items {
		all[r.GetName()] = true
		if s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState"); s == "Active" {
			active = append(active, r.GetName())
		}
	}
	if len(active) != 1 {
		return "", nil, fmt.Errorf("active %ss of %s: %v, want one", kind, pkgName, active)
	}
	return active[0], all, nil
}

// holder waits until the provider's leader Lease is held by pod.
func holder(ctx context.Context, t *testing.T, pod string) {
	t.Helper()
	waitFor(ctx, t, "the leader Lease held by "+pod, 2*time.Minute, func() error {
		l := &coordinationv1.Lease{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: testenv.CrossplaneNamespace, Name: leaseName}, l); err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || !strings.HasPrefix(*h, pod+"_") {
			return fmt.Errorf("holder %v", l.Spec.HolderIdentity)
		}
		return nil
	})
}

// reserve makes an existing database the admin hands to the Tenant ns/name:
// a Database with a claimRef naming the Tenant without a UID.
func reserve(ctx context.Context, t *testing.T, name, database, ns, tenant string) {
	t.Helper()
	u := tenantkit.MustUnstructured(fmt.Sprintf(`apiVersion: %s
kind: Database
metadata: {name: %s}
spec:
  providerConfigRef: {name: %s}
  claimRef: {namespace: %s, name: %s}
  forProvider: {database: %s}
`, tenantkit.TenantAPI, name, tenantkit.Instance, ns, tenant, database))
	if err := env.Kube.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the reserved Database Ready", 2*time.Minute, func() error {
		d, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Database", "", name)
		if err != nil {
			return err
		}
		if tenantkit.Ready(d) != "True" {
			return fmt.Errorf("not Ready: %v", d.Object["status"])
		}
		return nil
	})
}

func isReleased(ctx context.Context, name string) error {
	d, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Database", "", name)
	if err != nil {
		return fmt.Errorf("the Released Database %s: %w", name, err)
	}
	if p, _, _ := unstructured.NestedString(d.Object, "status", "binding", "phase"); p != "Released" {
		return fmt.Errorf("Database %s is %q, want Released", name, p)
	}
	return nil
}

// synced is nil when the Tenant ns/name is Synced, else says why not.
func synced(ctx context.Context, ns, name string) error {
	tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Tenant", ns, name)
	if err != nil {
		return err
	}
	if s, r, m := tenantkit.Condition(tn, "Synced"); s != "True" {
		return fmt.Errorf("Synced %q %s: %s", s, r, m)
	}
	return nil
}

// state reads what must survive an upgrade: the Secret's password (hashed;
// it also logs in), the Database's record version, the OIDs of its
// database and role.
func state(ctx context.Context, t *testing.T, ns, name, secret string) tenantState {
	t.Helper()
	pw := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, secret)
	sum := sha256.Sum256([]byte(pw))
	db := tenantkit.BoundDatabase(ctx, t, env, ns, name)
	database, _, _ := unstructured.NestedString(db.Object, "spec", "forProvider", "database")
	s := tenantState{ns: ns, name: name, secret: secret, database: db.GetName(), passwordHash: hex.EncodeToString(sum[:]),
		recordVer: tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(db.GetName()))}
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	if err := c.QueryRow(ctx, "SELECT d.oid, r.oid FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1", database).Scan(&s.dbOID, &s.role); err != nil {
		t.Fatalf("database %s and its owner: %v", database, err)
	}
	return s
}

func unchanged(t *testing.T, what string, b, a tenantState) {
	t.Helper()
	switch {
	case a.database != b.database:
		t.Errorf("%s: Tenant %s/%s is bound to %s, was %s", what, b.ns, b.name, a.database, b.database)
	case a.passwordHash != b.passwordHash:
		t.Errorf("%s: the password of Tenant %s/%s changed", what, b.ns, b.name)
	case a.recordVer != b.recordVer:
		t.Errorf("%s: the credential record of %s has %d versions, had %d", what, b.database, a.recordVer, b.recordVer)
	case a.dbOID != b.dbOID || a.role != b.role:
		t.Errorf("%s: the database or role of %s was made again (oids %d/%d, were %d/%d)", what, b.database, a.dbOID, a.role, b.dbOID, b.role)
	}
}

// readyWatch records, per Tenant, the longest time it was not Ready, and
// the Ready conditions that Tenant showed meanwhile (what a failure says).
type readyWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	longest time.Duration
	who     string
	why     []string
}

// watchReady polls the Tenants' Ready condition every 100 ms until stop.
func watchReady(ctx context.Context, ts []tenantState) *readyWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &readyWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		since := map[string]time.Time{}
		why := map[string][]string{}
		for ctx.Err() == nil {
			now := time.Now()
			for _, s := range ts {
				key := s.ns + "/" + s.name
				u, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Tenant", s.ns, s.name)
				if err == nil && tenantkit.Ready(u) == "True" {
					delete(since, key)
					delete(why, key)
					continue
				}
				if err != nil && ctx.Err() != nil {
					break
				}
				if _, ok := since[key]; !ok {
					since[key] = now
				}
				seen := fmt.Sprintf("%s: %v", now.Format("15:04:05.0"), err)
				if err == nil {
					st, reason, msg := tenantkit.Condition(u, "Ready")
					seen = fmt.Sprintf("%s: Ready=%q %s: %s", now.Format("15:04:05.0"), st, reason, msg)
				}
				if n := len(why[key]); n == 0 || why[key][n-1][len("15:04:05.0"):] != seen[len("15:04:05.0"):] {
					why[key] = append(why[key], seen)
				}
				d := now.Sub(since[key])
				w.mu.Lock()
				if d > w.longest {
					w.longest, w.who, w.why = d, key, why[key]
				}
				w.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

func (w *readyWatch) stop() (time.Duration, string, []string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest, w.who, w.why
}

func waitFor(ctx context.Context, t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	if err := testenv.WaitFor(ctx, timeout, func(context.Context) error { return check() }); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// packageState says, for a failure, what the Lock holds and what p's
// revisions are doing.
func packageState(ctx context.Context, p pkg) string {
	var b strings.Builder
	lock := &unstructured.Unstructured{}
	lock.SetAPIVersion("pkg.crossplane.io/v1beta1")
	lock.SetKind("Lock")
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: "lock"}, lock); err == nil {
		pkgs, _, _ := unstructured.NestedSlice(lock.Object, "packages")
		for _, x := range pkgs {
			m, _ := x.(map[string]any)
			fmt.Fprintf(&b, "lock: %v %v %v %v\n", m["name"], m["type"], m["source"], m["version"])
		}
	} else {
		fmt.Fprintf(&b, "lock: %v\n", err)
	}
	revs := &unstructured.UnstructuredList{}
	revs.SetAPIVersion("pkg.crossplane.io/v1")
	revs.SetKind(p.revisionKind + "List")
	if err := env.Kube.Client.List(ctx, revs, client.MatchingLabels{"pkg.crossplane.io/package": p.name}); err == nil {
		for _, r := range revs.Items {
			st, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState")
			img, _, _ := unstructured.NestedString(r.Object, "spec", "image")
			cs, _, _ := unstructured.NestedSlice(r.Object, "status", "conditions")
			fmt.Fprintf(&b, "revision %s: %s %s %v\n", r.GetName(), st, img, cs)
		}
	}
	evs := &corev1.EventList{}
	if err := env.Kube.Client.List(ctx, evs); err == nil {
		for _, ev := range evs.Items {
			if strings.HasSuffix(ev.InvolvedObject.Kind, "Revision") {
				fmt.Fprintf(&b, "event %s %s %s: %s\n", ev.InvolvedObject.Name, ev.Type, ev.Reason, ev.Message)
			}
		}
	}
	return b.String()
}
