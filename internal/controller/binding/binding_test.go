package binding

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/openbao/openbao/api/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// The DatabaseBinding controller runs in process against a real
// kube-apiserver (with the project's CRDs) and a real OpenBao. The Database
// controller does not run here: each test makes a Database Ready and writes
// its credential record itself, as that controller would.

var (
	env  *testenv.Env
	logs = &testenv.LogBuffer{}
	// binderKV is the controller's OpenBao client: a token that may read
	// Databases' records and write delivery copies, nothing else.
	binderKV *openbao.Client
	// admin is the harness's OpenBao client (root token).
	admin *openbao.Client
	opts  options.Options
	// proven stands in for the Database controller's memory of proven
	// logins: the record version each Database's standing login used.
	proven = &provenVersions{v: map[types.UID]int{}}
)

// provenVersions is what the Database controller would prove: the version
// the harness wrote last, at once (the binder never sees a Database
// between a write and its next proven login here).
type provenVersions struct {
	mu sync.Mutex
	v  map[types.UID]int
}

func (p *provenVersions) RecordVersion(uid types.UID, _ time.Time) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.v[uid]
	return v, ok
}

func (p *provenVersions) set(uid types.UID, version int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v[uid] = version
}

const (
	poll    = 500 * time.Millisecond
	timeout = 30 * time.Second
)

func TestMain(m *testing.M) {
	// With the Tenant kinds' CRDs, so that bindings have real Tenants, and
	// ESO's, so that ExternalSecrets can read their copies.
	testenv.Main(m, testenv.Options{Kube: true, OpenBao: true, TenantCRDs: true, ESOCRDs: true}, &env, start)
}

// binderPolicy grants the binder what it needs: read the Databases' own
// records, and manage the delivery copies.
func binderPolicy(mount, databases, tenants string) string {
	return fmt.Sprintf(`path "%[1]s/data/%[2]s/*" {
  capabilities = ["read"]
}
path "%[1]s/metadata/%[2]s/*" {
  capabilities = ["read"]
}
path "%[1]s/data/%[3]s/*" {
  capabilities = ["create", "read", "update", "delete"]
}
path "%[1]s/metadata/%[3]s/*" {
  capabilities = ["create", "read", "update", "patch", "delete", "list"]
}
`, mount, databases, tenants)
}

func tokenClient(e *testenv.Env, name, token string) (*openbao.Client, error) {
	f := filepath.Join(e.Dir, name+"-token")
	if err := os.WriteFile(f, []byte(token), 0o600); err != nil {
		return nil, err
	}
	// A short timeout: a paused OpenBao fails calls quickly.
	return openbao.New(openbao.Options{Address: e.OpenBao.Address, CABundleFile: e.CA.CertFile, TokenFile: f, KVMount: e.OpenBao.KVMount, Timeout: 2 * time.Second})
}

func start(e *testenv.Env) (func(), error) {
	ctx := context.Background()
	opts = options.Options{Namespace: testenv.ProviderNamespace, OpenBao: options.OpenBao{
		Address: e.OpenBao.Address, ConsumerAddress: "https://openbao.example:8200", KVMount: e.OpenBao.KVMount,
		DatabaseBasePath: options.DefaultDatabaseBasePath, TenantBasePath: e.OpenBao.TenantBasePath,
	}}
	root, err := e.OpenBao.Client(e.OpenBao.RootToken)
	if err != nil {
		return nil, err
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "binder", binderPolicy(e.OpenBao.KVMount, opts.OpenBao.DatabaseBasePath, opts.OpenBao.TenantBasePath)); err != nil {
		return nil, err
	}
	s, err := root.Auth().Token().CreateWithContext(ctx, &api.TokenCreateRequest{Policies: []string{"binder"}, NoDefaultPolicy: true, TTL: "2h"})
	if err != nil {
		return nil, err
	}
	if binderKV, err = tokenClient(e, "binder", s.Auth.ClientToken); err != nil {
		return nil, err
	}
	if admin, err = tokenClient(e, "admin", e.OpenBao.RootToken); err != nil {
		return nil, err
	}

	zl := zap.New(zap.UseDevMode(true), zap.WriteTo(logs))
	ctrl.SetLogger(zl)
	mgr, err := ctrl.NewManager(e.Kube.Config, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	o := controller.Options{
		Logger:                  logging.NewLogrLogger(zl),
		MaxConcurrentReconciles: 2,
		PollInterval:            poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(1000),
		Features:                &feature.Flags{},
	}
	o.Features.Enable(feature.EnableBetaManagementPolicies)
	// The binder reads a delivery in sync again only when the Database's
	// proven record version moves (or after an hour).
	opts.LoginCheckInterval = time.Hour
	if err := Setup(mgr, o, Deps{Options: opts, KV: binderKV, Records: proven}); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(cctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// --- harness ---

func suffix() string { return strings.Split(string(uuid.NewUUID()), "-")[0] }

func namespace(t *testing.T) string {
	t.Helper()
	ns := "ns-" + suffix()
	if err := env.Kube.EnsureNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// instance registers a ClusterProviderConfig and marks it Ready, as the
// config controller would.
func instance(t *testing.T, reclaim v1alpha1.ReclaimPolicy) string {
	t.Helper()
	ctx := context.Background()
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "pg-" + suffix()},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:             v1alpha1.Endpoint{Host: "db.example"},
			Credentials:          v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Name: "admin", Namespace: testenv.ProviderNamespace}},
			DefaultReclaimPolicy: reclaim,
		},
	}
	if err := env.Kube.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testenv.EditStatus(t, env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) {
		cfg.Status.SetConditions(xpv2.Available())
		cfg.Status.Phase = v1alpha1.ConfigPhaseReady
	})
	return cfg.GetName()
}

func recordPath(db string) string { return tenancy.CredentialPath(opts.OpenBao.DatabaseBasePath, db) }

func credential(db, password string) map[string]string {
	return map[string]string{"username": db, "password": password, "database": db, "host": "db.example", "hostaddr": "", "port": "5432", "sslmode": "verify-full"}
}

// makeReady writes the Database's own record (version 1) and marks the
// Database Ready with it, as the Database controller would.
func makeReady(t *testing.T, db *v1alpha1.Database, password string) {
	t.Helper()
	ctx := context.Background()
	p := recordPath(db.GetName())
	if err := admin.SetOwner(ctx, p, map[string]string{tenancy.MetaManagedBy: tenancy.ManagedBy, tenancy.MetaName: db.GetName(), tenancy.MetaUID: string(db.GetUID())}); err != nil {
		t.Fatal(err)
	}
	ver, err := admin.Write(ctx, p, credential(db.Spec.ForProvider.Database, password), 0)
	if err != nil {
		t.Fatal(err)
	}
	markReady(t, db, p, ver)
}

// markReady marks the Database Ready with version ver of its record at p
// proven, as the Database controller does once the record logs in.
func markReady(t *testing.T, db *v1alpha1.Database, p string, ver int) {
	t.Helper()
	proven.set(db.GetUID(), ver)
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) {
		db.Status.SetConditions(xpv2.Available())
		db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseReady
		db.Status.AtProvider.Credential.Path = p
	})
}

// database creates a static Database on inst, Ready with its record.
func database(t *testing.T, inst string, claim *v1alpha1.ClaimReference, reclaim v1alpha1.ReclaimPolicy, password string) *v1alpha1.Database {
	t.Helper()
	name := "db-" + suffix()
	db := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: inst}},
			ForProvider:                v1alpha1.DatabaseParameters{Database: strings.ReplaceAll(name, "-", "_")},
			ReclaimPolicy:              reclaim,
			ClaimRef:                   claim,
		},
	}
	if err := env.Kube.Client.Create(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	makeReady(t, db, password)
	return db
}

func staticBinding(ns, tenant, tenantUID, inst, ref string) *v1alpha1.DatabaseBinding {
	b := &v1alpha1.DatabaseBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant + "-db"},
		Spec: v1alpha1.DatabaseBindingSpec{
			ForProvider: v1alpha1.DatabaseBindingParameters{Tenant: v1alpha1.TenantReference{Name: tenant, UID: tenantUID}, DatabaseRef: ptr.To(ref)},
		},
	}
	if inst != "" {
		b.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: inst}
	}
	ownedByItsTenant(b)
	return b
}

// tenant creates the Tenant ns/name, as an app team would, listing the
// DatabaseBindings named bindings among its composed resources as
// Crossplane would before creating them, and returns its UID. Nothing
// composes it here.
func tenant(t *testing.T, ns, name string, bindings ...string) string {
	t.Helper()
	uid, err := testenv.CreateTenant(context.Background(), env.Kube.Client, ns, name, bindings...)
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// ownedByItsTenant gives a binding the controller owner reference a
// Tenant's Composition gives it (this environment has no garbage
// collector: a binding whose Tenant does not exist stays).
func ownedByItsTenant(b *v1alpha1.DatabaseBinding) {
	if metav1.GetControllerOf(b) != nil {
		return
	}
	b.SetOwnerReferences(append(b.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Tenant",
		Name: b.Spec.ForProvider.Tenant.Name, UID: types.UID(b.Spec.ForProvider.Tenant.UID),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}))
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if b, ok := o.(*v1alpha1.DatabaseBinding); ok {
		ownedByItsTenant(b)
	}
	if err := env.Kube.Client.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

func describeBinding(b *v1alpha1.DatabaseBinding) string {
	r, s := b.GetCondition(xpv2.TypeReady), b.GetCondition(xpv2.TypeSynced)
	return fmt.Sprintf("binding %s/%s: phase %q, record %s/%s, Ready %s/%s %q, Synced %s %q, deleting %v",
		b.GetNamespace(), b.GetName(), b.Status.AtProvider.Phase, b.Status.AtProvider.DatabaseName, b.Status.AtProvider.DatabaseUID,
		r.Status, r.Reason, r.Message, s.Status, s.Message, b.GetDeletionTimestamp() != nil)
}

func awaitBinding(t *testing.T, b *v1alpha1.DatabaseBinding, what string, cond func(*v1alpha1.DatabaseBinding) bool) {
	t.Helper()
	testenv.Await(t, env.Kube.Client, b, timeout, what, cond, describeBinding)
}

func readyReason(reason string) func(*v1alpha1.DatabaseBinding) bool {
	return func(b *v1alpha1.DatabaseBinding) bool {
		c := b.GetCondition(xpv2.TypeReady)
		return string(c.Reason) == reason
	}
}

func available(b *v1alpha1.DatabaseBinding) bool {
	return b.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
}

func awaitGone(t *testing.T, o client.Object, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
		if kerrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s is gone (last error %v); finalizers %v", what, err, o.GetFinalizers())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func copyPath(ns, tenant string) string {
	return tenancy.DeliveryPath(opts.OpenBao.TenantBasePath, ns, tenant)
}

func readKV(t *testing.T, p string) *openbao.Record {
	t.Helper()
	rec, err := admin.Read(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// awaitCopy polls the delivery copy until cond holds.
func awaitCopy(t *testing.T, p, what string, cond func(*openbao.Record) bool) *openbao.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rec := readKV(t, p)
		if cond(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s; the copy is %+v", what, ownerOnly(rec))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownerOnly describes a record without its data (no password in test
// output).
func ownerOnly(r *openbao.Record) string {
	if r == nil {
		return "absent"
	}
	return fmt.Sprintf("version %d, owner %v, %d keys", r.Version, r.Owner, len(r.Data))
}

// noSecretsIn fails when a binding's conditions, the namespace's events or
// the controller's logs carry one of the passwords.
func noSecretsIn(t *testing.T, ns string, b *v1alpha1.DatabaseBinding, passwords ...string) {
	t.Helper()
	ctx := context.Background()
	var texts []string
	for _, c := range b.Status.Conditions {
		texts = append(texts, c.Message)
	}
	ev := &corev1.EventList{}
	if err := env.Kube.Client.List(ctx, ev, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range ev.Items {
		texts = append(texts, e.Message)
	}
	texts = append(texts, logs.String())
	for _, p := range passwords {
		for _, s := range texts {
			if strings.Contains(s, p) {
				t.Fatalf("a password appears in a condition, an event or the logs")
			}
		}
	}
}

// --- tests ---

// A dynamic binding creates its Database named after the Tenant's UID,
// with the claim already set and the instance's default reclaim policy;
// once the Database is Ready the credential is copied with ownership
// metadata, and re-copied when the Database's record gets a new version;
// deleting the binding with reclaimPolicy Delete deletes the Database and
// the copy.
func TestDynamicProvisioning(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimDelete)
	tenantUID := tenant(t, ns, "shop", "shop-db")
	b := &v1alpha1.DatabaseBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db"},
		Spec: v1alpha1.DatabaseBindingSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: inst}},
			ForProvider: v1alpha1.DatabaseBindingParameters{
				Tenant: v1alpha1.TenantReference{Name: "shop", UID: tenantUID}, Database: ptr.To("shop"), Extensions: []string{"pg_trgm"},
			},
		},
	}
	create(t, b)

	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + tenantUID}}
	testenv.Await(t, env.Kube.Client, db, timeout, "the Database is created", func(*v1alpha1.Database) bool { return true }, func(*v1alpha1.Database) string { return describeBinding(b) })
	want := v1alpha1.DatabaseSpec{
		ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: inst}, ManagementPolicies: v1alpha1.DefaultManagementPolicies},
		ForProvider:                v1alpha1.DatabaseParameters{Database: "shop", Extensions: []string{"pg_trgm"}},
		ReclaimPolicy:              v1alpha1.ReclaimDelete,
		ClaimRef:                   &v1alpha1.ClaimReference{Namespace: ns, Name: "shop", UID: tenantUID},
	}
	// The legacy deletionPolicy (its CRD default) is ignored: reclaimPolicy
	// decides.
	if diff := cmp.Diff(want, db.Spec, cmpopts.IgnoreFields(xpv2.ClusterManagedResourceSpec{}, "DeletionPolicy")); diff != "" {
		t.Errorf("the created Database: -want +got:\n%s", diff)
	}
	awaitBinding(t, b, "the binding records the Database and waits for it", func(b *v1alpha1.DatabaseBinding) bool {
		return b.Status.AtProvider.DatabaseUID == string(db.GetUID()) && readyReason(tenancy.ReasonDatabaseNotReady)(b)
	})
	if b.Status.AtProvider.Phase != v1alpha1.BindingPhaseProvisioning {
		t.Errorf("phase = %q; want Provisioning", b.Status.AtProvider.Phase)
	}
	pcu := &v1alpha1.ProviderConfigUsage{}
	if err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(b.GetUID())}, pcu); err != nil {
		t.Errorf("no ProviderConfigUsage of the binding: %v", err)
	} else if pcu.ProviderConfigReference.Name != inst {
		t.Errorf("the usage names %q; want %q", pcu.ProviderConfigReference.Name, inst)
	}
	cp := copyPath(ns, "shop")
	if rec := readKV(t, cp); rec != nil {
		t.Fatalf("a copy exists before the Database is Ready: %s", ownerOnly(rec))
	}

	makeReady(t, db, "first-secret-1")
	awaitBinding(t, b, "the binding is Available", available)
	rec := readKV(t, cp)
	if diff := cmp.Diff(credential("shop", "first-secret-1"), rec.Data); diff != "" {
		t.Errorf("the copy's data differs from the record's (-want +got): %d keys differ", strings.Count(diff, "\n"))
	}
	spec := specOf(b)
	if diff := cmp.Diff(tenancy.DeliveryOwner(spec, db.GetName(), string(db.GetUID()), 1), rec.Owner); diff != "" {
		t.Errorf("the copy's ownership metadata: -want +got:\n%s", diff)
	}
	// Version: the record version the copy holds (the function annotates
	// the ExternalSecret with it, so a rotation reaches the Secret at once).
	wantCred := v1alpha1.CredentialObservation{Path: cp, OpenBaoURL: "https://openbao.example:8200/v1/kv/data/" + cp, Version: 1}
	if diff := cmp.Diff(wantCred, b.Status.AtProvider.Credential); diff != "" {
		t.Errorf("status.atProvider.credential: -want +got:\n%s", diff)
	}
	if b.Status.AtProvider.Phase != v1alpha1.BindingPhaseReady || b.Status.AtProvider.Database != "shop" || b.Status.AtProvider.Instance != inst {
		t.Errorf("status.atProvider = %+v", b.Status.AtProvider)
	}

	// An admin rotates the Database's credential: a new version of its
	// record is copied.
	// In sync, the binder stops reading the record and the copy.
	skipped := testutil.ToFloat64(metrics.DeliveryChecks.WithLabelValues("skipped"))
	time.Sleep(4 * poll)
	if testutil.ToFloat64(metrics.DeliveryChecks.WithLabelValues("skipped")) == skipped {
		t.Fatal("the binder never relied on its last reading of the delivery: the rotation below would prove nothing")
	}
	// The Database proves the new version before the binder's next poll:
	// the binder must see the version move, not only a Database between
	// a write and its next login.
	ver, err := admin.Write(ctx, recordPath(db.GetName()), credential("shop", "second-secret-2"), 1)
	if err != nil {
		t.Fatal(err)
	}
	proven.set(db.GetUID(), ver)
	rec = awaitCopy(t, cp, "the new version is copied", func(r *openbao.Record) bool {
		return r != nil && r.Owner[tenancy.MetaSourceVersion] == "2"
	})
	if rec.Data["password"] != "second-secret-2" {
		t.Error("the copy does not hold the rotated password")
	}
	noSecretsIn(t, ns, b, "first-secret-1", "second-secret-2")

	// Release with reclaimPolicy Delete: the Database is deleted, then the
	// copy.
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, b, "the binding")
	awaitGone(t, db, "the Database")
	if rec := readKV(t, cp); rec != nil {
		t.Errorf("the copy survived the binding: %s", ownerOnly(rec))
	}
}

// nopTracker records nothing (the bindings of the race test do not name an
// instance).
type nopTracker struct{}

func (nopTracker) Track(context.Context, resource.ModernManaged) error { return nil }

// Two bindings that read the same Available Database both decide to claim
// it; the claim write carries the resourceVersion read, so the second one
// loses with a conflict and writes nothing, and re-deciding refuses it.
func TestStaticClaimCarriesTheResourceVersionRead(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	inst := instance(t, v1alpha1.ReclaimRetain)
	db := database(t, inst, nil, v1alpha1.ReclaimRetain, "race-secret")
	conn := &connector{log: logging.NewNopLogger(), kube: env.Kube.Client, reader: env.Kube.Client, usage: nopTracker{}, deps: Deps{Options: opts, KV: binderKV}}

	nsA, nsB := namespace(t), namespace(t)
	a := staticBinding(nsA, "alpha", tenant(t, nsA, "alpha", "alpha-db"), "", db.GetName())
	a.SetUID(uuid.NewUUID())
	b := staticBinding(nsB, "beta", tenant(t, nsB, "beta", "beta-db"), "", db.GetName())
	b.SetUID(uuid.NewUUID())
	ea, err := conn.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := conn.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := ea.Observe(ctx, a)
	if err != nil || oa.ResourceExists {
		t.Fatalf("a: Observe = %+v, %v; want a claim to write", oa, err)
	}
	ob, err := eb.Observe(ctx, b)
	if err != nil || ob.ResourceExists {
		t.Fatalf("b: Observe = %+v, %v; want a claim to write", ob, err)
	}
	if _, err := ea.Create(ctx, a); err != nil {
		t.Fatalf("a: Create = %v", err)
	}
	won := &v1alpha1.Database{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), won); err != nil {
		t.Fatal(err)
	}
	_, err = eb.Create(ctx, b)
	if !kerrors.IsConflict(err) {
		t.Fatalf("b: Create = %v; want a conflict", err)
	}
	after := &v1alpha1.Database{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), after); err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != won.GetResourceVersion() {
		t.Errorf("the loser wrote: resourceVersion %s -> %s", won.GetResourceVersion(), after.GetResourceVersion())
	}
	if diff := cmp.Diff(&v1alpha1.ClaimReference{Namespace: nsA, Name: "alpha", UID: a.Spec.ForProvider.Tenant.UID}, after.Spec.ClaimRef); diff != "" {
		t.Errorf("claimRef: -want +got:\n%s", diff)
	}

	// Re-decided on the claimed Database, the loser is refused while the
	// winner's Tenant has a live binding.
	create(t, staticBinding(nsA, "alpha", a.Spec.ForProvider.Tenant.UID, "", db.GetName()))
	eb, err = conn.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if ob, err := eb.Observe(ctx, b); err != nil || !ob.ResourceExists || !ob.ResourceUpToDate {
		t.Fatalf("b: Observe = %+v, %v; want nothing to do", ob, err)
	}
	if r := b.GetCondition(xpv2.TypeReady).Reason; r != tenancy.ReasonAlreadyBound {
		t.Errorf("b: Ready reason %q; want AlreadyBound", r)
	}
}

// A static binding claims an Available Database and delivers its
// credential. Deleting it with reclaimPolicy Retain records the Database
// Released through the Kubernetes API alone, while OpenBao is down; the
// binding's finalizer then waits until OpenBao is back to delete the copy.
func TestRetainReleaseNeedsOnlyKubernetes(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimDelete)
	db := database(t, inst, nil, v1alpha1.ReclaimRetain, "retain-secret")
	tenantUID := tenant(t, ns, "web", "web-db")
	b := staticBinding(ns, "web", tenantUID, inst, db.GetName())
	create(t, b)
	awaitBinding(t, b, "the binding is Available", available)
	claim := v1alpha1.ClaimReference{Namespace: ns, Name: "web", UID: tenantUID}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&claim, db.Spec.ClaimRef); diff != "" {
		t.Fatalf("claimRef: -want +got:\n%s", diff)
	}
	if b.Status.AtProvider.DatabaseName != db.GetName() || b.Status.AtProvider.DatabaseUID != string(db.GetUID()) {
		t.Errorf("the binding records %s/%s", b.Status.AtProvider.DatabaseName, b.Status.AtProvider.DatabaseUID)
	}
	cp := copyPath(ns, "web")
	if rec := readKV(t, cp); rec == nil || rec.Owner[tenancy.MetaBindingUID] != string(b.GetUID()) {
		t.Fatalf("no copy of this binding: %s", ownerOnly(rec))
	}

	if err := env.OpenBao.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = env.OpenBao.Resume()
		}
	}()
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, env.Kube.Client, db, timeout, "the Database is recorded Released", func(db *v1alpha1.Database) bool {
		return db.Status.Binding.Phase == v1alpha1.BindingReleased
	}, func(db *v1alpha1.Database) string { return fmt.Sprintf("binding status %+v", db.Status.Binding) })
	if diff := cmp.Diff(tenancy.ReleasedStatus(claim), db.Status.Binding); diff != "" {
		t.Errorf("status.binding: -want +got:\n%s", diff)
	}
	if db.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue || db.Status.AtProvider.Credential.Path == "" {
		t.Errorf("recording Released changed the rest of the Database's status: %+v", db.Status)
	}
	// The copy cannot be deleted while OpenBao is down: the finalizer
	// stays.
	time.Sleep(3 * time.Second)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatalf("the binding went away while its copy could not be deleted: %v", err)
	}
	if err := env.OpenBao.Resume(); err != nil {
		t.Fatal(err)
	}
	paused = false
	awaitGone(t, b, "the binding")
	if rec := readKV(t, cp); rec != nil {
		t.Errorf("the copy survived the binding: %s", ownerOnly(rec))
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatalf("reclaimPolicy Retain: the Database must stay: %v", err)
	}
	if diff := cmp.Diff(&claim, db.Spec.ClaimRef); diff != "" {
		t.Errorf("a Released Database keeps its claim: -want +got:\n%s", diff)
	}
}

// A Released Database is not rebound to a new Tenant of the same namespace
// and name (a new UID), and nothing is written to it; deleting the refused
// binding releases nothing (the Database's reclaimPolicy is Delete).
func TestReleasedIsNotRebound(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	old := v1alpha1.ClaimReference{Namespace: ns, Name: "shop", UID: string(uuid.NewUUID())}
	// reclaimPolicy Delete: a binding that released what it never bound
	// would delete the Database.
	db := database(t, inst, &old, v1alpha1.ReclaimDelete, "released-secret")
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) { db.Status.Binding = tenancy.ReleasedStatus(old) })
	rv := db.GetResourceVersion()
	b := staticBinding(ns, "shop", tenant(t, ns, "shop", "shop-db"), inst, db.GetName())
	create(t, b)
	awaitBinding(t, b, "the binding is refused as Released", readyReason(tenancy.ReasonReleased))
	if !strings.Contains(b.GetCondition(xpv2.TypeReady).Message, "never rebound automatically") {
		t.Errorf("message %q does not tell what to do", b.GetCondition(xpv2.TypeReady).Message)
	}
	if b.Status.AtProvider.DatabaseName != "" {
		t.Errorf("a refused binding records %q", b.Status.AtProvider.DatabaseName)
	}
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, b, "the refused binding")
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if db.GetResourceVersion() != rv {
		t.Errorf("the Released Database was written (resourceVersion %s -> %s): claimRef %+v, binding %+v", rv, db.GetResourceVersion(), db.Spec.ClaimRef, db.Status.Binding)
	}
	if rec := readKV(t, copyPath(ns, "shop")); rec != nil {
		t.Errorf("a refused binding wrote a copy: %s", ownerOnly(rec))
	}
}

// A delivery path that holds another owner's record is a Conflict: the
// record is neither overwritten nor deleted with the binding.
func TestDeliveryPathOwnedByAnother(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	db := database(t, inst, nil, v1alpha1.ReclaimRetain, "conflict-secret")
	cp := copyPath(ns, "api")
	theirs := map[string]string{tenancy.MetaManagedBy: tenancy.ManagedBy, tenancy.MetaBindingNamespace: ns, tenancy.MetaBindingName: "api-db", tenancy.MetaBindingUID: "an-earlier-binding"}
	if err := admin.SetOwner(ctx, cp, theirs); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Write(ctx, cp, map[string]string{"username": "someone"}, 0); err != nil {
		t.Fatal(err)
	}
	b := staticBinding(ns, "api", tenant(t, ns, "api", "api-db"), inst, db.GetName())
	create(t, b)
	awaitBinding(t, b, "the binding reports the Conflict", readyReason(tenancy.ReasonConflict))
	// The owner is named as the namespace may see it: by name, never by
	// UID.
	if msg := b.GetCondition(xpv2.TypeReady).Message; !strings.Contains(msg, "an earlier DatabaseBinding of this name in this namespace") || strings.Contains(msg, "an-earlier-binding") {
		t.Errorf("message %q does not name the owner by name alone", msg)
	}
	want := &openbao.Record{Data: map[string]string{"username": "someone"}, Owner: theirs, Version: 1}
	// Its version's time, as first read, must not change either.
	if got := readKV(t, cp); got != nil && !got.Created.IsZero() {
		want.Created = got.Created
	}
	if diff := cmp.Diff(want, readKV(t, cp)); diff != "" {
		t.Errorf("the other owner's record changed: -want +got:\n%s", diff)
	}
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, b, "the binding")
	if diff := cmp.Diff(want, readKV(t, cp)); diff != "" {
		t.Errorf("deleting the binding changed the other owner's record: -want +got:\n%s", diff)
	}
}

// A dynamic create that finds its Database already there (a retry, or a
// stale cache) reuses it only when its claim names this Tenant; otherwise
// it is refused and the Database is left as it is.
func TestDynamicRetryReusesOnlyItsOwnDatabase(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	inst := instance(t, v1alpha1.ReclaimRetain)
	conn := &connector{log: logging.NewNopLogger(), kube: env.Kube.Client, reader: env.Kube.Client, usage: nopTracker{}, deps: Deps{Options: opts, KV: binderKV}}
	for name, tc := range map[string]struct {
		claim   func(ns, tenantUID string) *v1alpha1.ClaimReference
		wantErr bool
	}{
		"Ours": {claim: func(ns, u string) *v1alpha1.ClaimReference {
			return &v1alpha1.ClaimReference{Namespace: ns, Name: "shop", UID: u}
		}},
		"Another": {claim: func(string, string) *v1alpha1.ClaimReference {
			return &v1alpha1.ClaimReference{Namespace: "elsewhere", Name: "shop", UID: "someone-else"}
		}, wantErr: true},
		"None": {claim: func(string, string) *v1alpha1.ClaimReference { return nil }, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			tenantUID := tenant(t, ns, "shop", "shop-db")
			b := &v1alpha1.DatabaseBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db", UID: uuid.NewUUID()},
				Spec: v1alpha1.DatabaseBindingSpec{
					ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: inst}},
					ForProvider:         v1alpha1.DatabaseBindingParameters{Tenant: v1alpha1.TenantReference{Name: "shop", UID: tenantUID}, Database: ptr.To("shop")},
				},
			}
			ownedByItsTenant(b)
			e, err := conn.Connect(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if o, err := e.Observe(ctx, b); err != nil || o.ResourceExists {
				t.Fatalf("Observe = %+v, %v; want the Database to create", o, err)
			}
			// Someone creates the Database between Observe and Create.
			there := &v1alpha1.Database{
				ObjectMeta: metav1.ObjectMeta{Name: tenancy.DynamicDatabaseName(tenantUID)},
				Spec: v1alpha1.DatabaseSpec{
					ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: inst}},
					ForProvider:                v1alpha1.DatabaseParameters{Database: "other"},
					ClaimRef:                   tc.claim(ns, tenantUID),
				},
			}
			create(t, there)
			_, err = e.Create(ctx, b)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Create = %v; want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr && b.GetCondition(xpv2.TypeReady).Reason != tenancy.ReasonConflict {
				t.Errorf("Ready reason %q; want Conflict", b.GetCondition(xpv2.TypeReady).Reason)
			}
			after := &v1alpha1.Database{}
			if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(there), after); err != nil {
				t.Fatal(err)
			}
			if after.GetResourceVersion() != there.GetResourceVersion() || after.Spec.ForProvider.Database != "other" {
				t.Errorf("the existing Database was written")
			}
		})
	}
}

// A DatabaseBinding written by hand, naming the UID of an earlier Tenant
// whose Database was Released, takes nothing back, whatever controller
// reference it carries: none (its Tenant is gone: it releases what it
// holds, which is nothing), one of an apiVersion nobody serves (so the
// garbage collector would never remove it) or the Tenant kind with the
// gone Tenant's UID. It is refused, records nothing, gets no copy, and the
// Database stays Released with its claim; its message names no UID.
func TestHandWrittenBindingTakesNothing(t *testing.T) {
	testenv.Need(t)
	for name, tc := range map[string]struct {
		owner  func(b *v1alpha1.DatabaseBinding)
		reason string
	}{
		"NoController": {owner: func(b *v1alpha1.DatabaseBinding) { b.SetOwnerReferences(nil) }, reason: tenancy.ReasonTenantGone},
		"UnservedAPIVersion": {owner: func(b *v1alpha1.DatabaseBinding) {
			b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "forged.example.org/v1", Kind: "Anything", Name: "shop",
				UID: types.UID(b.Spec.ForProvider.Tenant.UID), Controller: ptr.To(true)}})
		}, reason: tenancy.ReasonNotATenantsBinding},
		"TenantKindOfTheGoneTenant": {owner: func(*v1alpha1.DatabaseBinding) {}, reason: tenancy.ReasonTenantGone},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			inst := instance(t, v1alpha1.ReclaimRetain)
			old := v1alpha1.ClaimReference{Namespace: ns, Name: "shop", UID: string(uuid.NewUUID())}
			db := database(t, inst, &old, v1alpha1.ReclaimDelete, "forged-secret")
			testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) { db.Status.Binding = tenancy.ReleasedStatus(old) })
			rv := db.GetResourceVersion()
			b := staticBinding(ns, "shop", old.UID, "", db.GetName())
			tc.owner(b)
			if err := env.Kube.Client.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			awaitBinding(t, b, "the forged binding is refused", readyReason(tc.reason))
			time.Sleep(3 * time.Second)
			if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
				t.Fatal(err)
			}
			if b.Status.AtProvider.DatabaseName != "" {
				t.Errorf("the forged binding recorded Database %s", b.Status.AtProvider.DatabaseName)
			}
			if msg := b.GetCondition(xpv2.TypeReady).Message; strings.Contains(msg, old.UID) {
				t.Errorf("the refusal tells the earlier Tenant's UID: %q", msg)
			}
			if rec := readKV(t, copyPath(ns, "shop")); rec != nil {
				t.Errorf("the forged binding got a copy: %s", ownerOnly(rec))
			}
			if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
				t.Fatal(err)
			}
			if db.GetResourceVersion() != rv || db.Status.Binding.Phase != v1alpha1.BindingReleased || db.GetDeletionTimestamp() != nil {
				t.Errorf("the Released Database was written (resourceVersion %s -> %s): phase %q, deleting %v", rv, db.GetResourceVersion(), db.Status.Binding.Phase, db.GetDeletionTimestamp() != nil)
			}
		})
	}
}

// A Tenant deleted with its dependents orphaned leaves its binding without
// a controller: the binding releases its Database as its deletion would
// (Retain: Released; Delete: the Database is deleted), removes its delivery
// copy and says its Tenant is gone; a binding whose Tenant exists but does
// not list it (forged next to a live Tenant) is never delivered.
func TestOrphanedBindingReleases(t *testing.T) {
	testenv.Need(t)
	for _, reclaim := range []v1alpha1.ReclaimPolicy{v1alpha1.ReclaimRetain, v1alpha1.ReclaimDelete} {
		t.Run(string(reclaim), func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			inst := instance(t, v1alpha1.ReclaimRetain)
			db := database(t, inst, nil, reclaim, "orphan-secret")
			uid := tenant(t, ns, "app", "app-db")
			b := staticBinding(ns, "app", uid, inst, db.GetName())
			create(t, b)
			awaitBinding(t, b, "the binding is Available", available)
			if rec := readKV(t, copyPath(ns, "app")); rec == nil {
				t.Fatal("no delivery copy")
			}
			orphan(ctx, t, ns, "app", b)
			awaitBinding(t, b, "the binding says its Tenant is gone", readyReason(tenancy.ReasonTenantGone))
			if msg := b.GetCondition(xpv2.TypeReady).Message; !strings.Contains(msg, "delete this DatabaseBinding") {
				t.Errorf("message %q does not say what to do", msg)
			}
			if reclaim == v1alpha1.ReclaimDelete {
				awaitGone(t, db, "the Database (reclaimPolicy Delete)")
			} else {
				testenv.Await(t, env.Kube.Client, db, timeout, "the Database is Released", func(d *v1alpha1.Database) bool {
					return d.Status.Binding.Phase == v1alpha1.BindingReleased && !controllerutil.ContainsFinalizer(d, tenancy.ClaimProtectionFinalizer)
				}, func(d *v1alpha1.Database) string {
					return fmt.Sprintf("%+v, finalizers %v", d.Status.Binding, d.GetFinalizers())
				})
			}
			deadline := time.Now().Add(timeout)
			for rec := readKV(t, copyPath(ns, "app")); rec != nil; rec = readKV(t, copyPath(ns, "app")) {
				if time.Now().After(deadline) {
					t.Fatalf("the delivery copy is still there: %s", ownerOnly(rec))
				}
				time.Sleep(poll)
			}
		})
	}
}

// A bound Database carries the claim protection: an admin's delete leaves
// it in place (only marked for deletion) for as long as its Tenant uses it,
// whatever its management policies; the release lifts the protection and
// the deletion completes.
func TestBoundDatabaseIsProtectedUntilReleased(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	_, db, b, _ := availableStatic(t, "app", "protected-secret")
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(db, tenancy.ClaimProtectionFinalizer) {
		t.Fatalf("the bound Database lacks the claim protection: finalizers %v", db.GetFinalizers())
	}
	if err := env.Kube.Client.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatalf("the bound Database went away while its Tenant uses it: %v", err)
	}
	if db.GetDeletionTimestamp() == nil {
		t.Fatal("the Database was not even marked for deletion: the check above proves nothing")
	}
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, b, "the binding")
	awaitGone(t, db, "the released Database")
}

// Deleting a Tenant's own binding (the Tenant stays) releases its
// Database, and a released Database is not bound again, even to a binding
// of the very Tenant that released it: only an admin's claimRef edit
// reopens it. With the claim cleared, the Tenant's binding binds it again.
func TestReleasedIsNotReboundEvenForItsTenant(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	db := database(t, inst, nil, v1alpha1.ReclaimRetain, "rebind-secret")
	uid := tenant(t, ns, "app", "app-db")
	b := staticBinding(ns, "app", uid, inst, db.GetName())
	create(t, b)
	awaitBinding(t, b, "the binding is Available", available)
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, b, "the binding")
	testenv.Await(t, env.Kube.Client, db, timeout, "the Database is Released", func(d *v1alpha1.Database) bool {
		return d.Status.Binding.Phase == v1alpha1.BindingReleased
	}, func(d *v1alpha1.Database) string { return fmt.Sprintf("%+v", d.Status.Binding) })

	again := staticBinding(ns, "app", uid, inst, db.GetName())
	create(t, again)
	awaitBinding(t, again, "the Tenant's new binding is refused as Released", readyReason(tenancy.ReasonReleased))
	time.Sleep(2 * time.Second)
	if rec := readKV(t, copyPath(ns, "app")); rec != nil {
		t.Errorf("the refused binding got a copy: %s", ownerOnly(rec))
	}
	if msg := again.GetCondition(xpv2.TypeReady).Message; strings.Contains(msg, uid) {
		t.Errorf("the refusal tells a UID: %q", msg)
	}

	// The admin clears the claim: the Tenant's binding binds it again.
	testenv.Edit(t, env.Kube.Client, db, func(db *v1alpha1.Database) { db.Spec.ClaimRef = nil })
	// As the Database controller (not running here) shows it.
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) {
		db.Status.Binding = tenancy.BindingOf(nil, db.Status.Binding, false)
	})
	awaitBinding(t, again, "the binding is Available after the admin's edit", available)
}

// What a binding's namespace reads of a refusal names nothing of another
// namespace's claim (its namespace, Tenant name or UID) and none of the
// messages of a Database that is not its own.
func TestRefusalsNameNoOtherClaim(t *testing.T) {
	testenv.Need(t)
	owner, thief := namespace(t), namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	db := database(t, inst, nil, v1alpha1.ReclaimRetain, "owned-secret")
	ownerUID := tenant(t, owner, "precious", "precious-db")
	ob := staticBinding(owner, "precious", ownerUID, inst, db.GetName())
	create(t, ob)
	awaitBinding(t, ob, "the owner's binding is Available", available)
	tb := staticBinding(thief, "grab", tenant(t, thief, "grab", "grab-db"), inst, db.GetName())
	create(t, tb)
	awaitBinding(t, tb, "AlreadyBound", readyReason(tenancy.ReasonAlreadyBound))
	if msg := tb.GetCondition(xpv2.TypeReady).Message; strings.Contains(msg, owner) || strings.Contains(msg, "precious") || strings.Contains(msg, ownerUID) {
		t.Errorf("the refusal tells the other namespace's claim: %q", msg)
	}

	// A Database that is not the binding's and not Ready: its message is
	// not relayed.
	const secretMessage = "only-for-the-admin-0451"
	other := database(t, inst, nil, v1alpha1.ReclaimRetain, "other-secret")
	testenv.EditStatus(t, env.Kube.Client, other, func(d *v1alpha1.Database) {
		d.Status.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Conflict", Message: secretMessage, LastTransitionTime: metav1.Now()})
	})
	wb := staticBinding(thief, "wait", tenant(t, thief, "wait", "wait-db"), inst, other.GetName())
	create(t, wb)
	awaitBinding(t, wb, "DatabaseNotReady", readyReason(tenancy.ReasonDatabaseNotReady))
	if msg := wb.GetCondition(xpv2.TypeReady).Message; strings.Contains(msg, secretMessage) {
		t.Errorf("another Database's Ready message reached the binding: %q", msg)
	}
}

// availableStatic makes, on a Retain instance, a Ready Database with a
// Retain policy and a static binding of a new Tenant named tenantName in a
// new namespace, and waits until the binding is Available.
func availableStatic(t *testing.T, tenantName, password string) (ns string, db *v1alpha1.Database, b *v1alpha1.DatabaseBinding, tenantUID string) {
	t.Helper()
	ns = namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	db = database(t, inst, nil, v1alpha1.ReclaimRetain, password)
	tenantUID = tenant(t, ns, tenantName, tenantName+"-db")
	b = staticBinding(ns, tenantName, tenantUID, inst, db.GetName())
	create(t, b)
	awaitBinding(t, b, "the binding is Available", available)
	return ns, db, b, tenantUID
}

// orphan plays `kubectl delete tenants.database.ayatori.ddupan.top <name> --cascade=orphan`: the
// Tenant goes and the garbage collector removes the binding's owner
// reference.
func orphan(ctx context.Context, t *testing.T, ns, name string, b *v1alpha1.DatabaseBinding) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(tenancy.TenantAPIVersion)
	u.SetKind(tenancy.TenantKind)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := env.Kube.Client.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	testenv.Edit(t, env.Kube.Client, b, func(b *v1alpha1.DatabaseBinding) { b.SetOwnerReferences(nil) })
}
