// Package upgrade upgrades the provider, its composition function and the
// Configuration the way users do, on the test node with Crossplane core's
// default (Deployment) package runtime: the packages of an earlier commit
// of this repository are installed, Tenants are made (dynamic, static and
// one Released), then this tree's packages are published as a later
// version and each package object's spec.package is edited to it (the
// provider first, then the function, then the Configuration), and back
// again for the rollback. Throughout, no Tenant may leave Ready for longer
// than notReadyBound; after each step no password has changed, no database
// or role was made again or dropped, and the Released Database is still
// Released.
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

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// from is the earlier commit users upgrade from: the last release of the
// provider before the Tenant's Usage was replaced by the binding's own
// wait, so the drill also shows an upgraded Tenant losing its Usage (and
// a rolled-back one getting it again).
const from = "a140242abce08ebf9b5be4498c041365077f7baf"

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
	if n := usages(ctx, t, "up-dyn"); n != 1 {
		t.Fatalf("the earlier packages composed %d Usages for a Tenant, want 1: is %s the commit before the Usage was replaced?", n, from[:7])
	}
	before := []tenantState{
		state(ctx, t, "up-dyn", "up-dyn", tenantkit.SecretName("up-dyn")),
		state(ctx, t, "up-static", "up-static", tenantkit.StaticSecretName("up-static")),
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
		longest, who := w.stop()
		t.Logf("%s: the provider Pod %s replaced by %s; the longest a Tenant was not Ready: %s (%s)", what, oldPod, newPod, longest.Round(time.Millisecond), who)
		if longest > notReadyBound {
			t.Errorf("%s: Tenant %s was not Ready for %s, want at most %s", what, who, longest.Round(time.Millisecond), notReadyBound)
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

	// Upgrade: the provider first (it waits for ExternalSecrets itself),
	// then the function (it stops composing the Usage), then the
	// Configuration.
	step("upgrade", next, []pkg{provider, function, configuration})
	waitFor(ctx, t, "the upgraded function no longer composes the Usage (core deletes it)", 2*time.Minute, func() error {
		if n := usages(ctx, t, "up-dyn"); n != 0 {
			return fmt.Errorf("%d Usages: %s", n, usageState(ctx, "up-dyn"))
		}
		return nil
	})

	// Rollback, in the reverse order.
	step("rollback", testenv.PackageTestVersion, []pkg{configuration, function, provider})
	waitFor(ctx, t, "the rolled-back function composes the Usage again", 2*time.Minute, func() error {
		if n := usages(ctx, t, "up-dyn"); n != 1 {
			return fmt.Errorf("%d Usages: %s", n, usageState(ctx, "up-dyn"))
		}
		return nil
	})
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

// usages counts the Usages in namespace ns.
func usages(ctx context.Context, t *testing.T, ns string) int {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("protection.crossplane.io/v1beta1")
	l.SetKind("UsageList")
	if err := env.Kube.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
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

// usageState says, for a failure, what the Tenant ns/ns is doing, what
// each Usage in ns is doing (being deleted, its finalizers, its
// conditions) and the namespace's Events other than Normal ones.
func usageState(ctx context.Context, ns string) string {
	var b strings.Builder
	b.WriteString("\n" + tenantkit.Describe(ctx, env, tenantkit.TenantAPI, ns, ns))
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("protection.crossplane.io/v1beta1")
	l.SetKind("UsageList")
	if err := env.Kube.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
		return b.String() + err.Error()
	}
	for _, u := range l.Items {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		fmt.Fprintf(&b, "Usage %s: deleting=%v finalizers=%v conditions=%v\n", u.GetName(), u.GetDeletionTimestamp() != nil, u.GetFinalizers(), conds)
	}
	evs := &corev1.EventList{}
	_ = env.Kube.Client.List(ctx, evs, client.InNamespace(ns))
	for _, e := range evs.Items {
		if e.Type != corev1.EventTypeNormal {
			fmt.Fprintf(&b, "event %s/%s %s x%d: %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Count, e.Message)
		}
	}
	return b.String()
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

// readyWatch records, per Tenant, the longest time it was not Ready.
type readyWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	longest time.Duration
	who     string
}

// watchReady polls the Tenants' Ready condition every 100 ms until stop.
func watchReady(ctx context.Context, ts []tenantState) *readyWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &readyWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		since := map[string]time.Time{}
		for ctx.Err() == nil {
			now := time.Now()
			for _, s := range ts {
				key := s.ns + "/" + s.name
				u, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Tenant", s.ns, s.name)
				if err == nil && tenantkit.Ready(u) == "True" {
					delete(since, key)
					continue
				}
				if err != nil && ctx.Err() != nil {
					break
				}
				if _, ok := since[key]; !ok {
					since[key] = now
				}
				d := now.Sub(since[key])
				w.mu.Lock()
				if d > w.longest {
					w.longest, w.who = d, key
				}
				w.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

func (w *readyWatch) stop() (time.Duration, string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest, w.who
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
