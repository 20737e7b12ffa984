package delivery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// The app team deletes its Tenant's DatabaseBinding (the Tenant stays; the
// instance's policy is Retain), and the Tenant's Composition writes the
// same binding again. With the Database controller and the binder both
// running: the Database is Released and the delivery copy goes; the
// binding written again does not bind it back, nothing is delivered, and
// the binding and the Tenant say why (Released, ask for the rebind). An
// admin's rebind as admins.md describes it (clear the claim, wait for
// Available, set it to the Tenant) gives the Tenant its database back.
// Released once more, the Database goes when the admin deletes it: the
// binding written again does not hold it.
func TestRecreatedBindingDoesNotRebind(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns, name = "recreate", "recreate"
	tenantkit.NewTenant(ctx, t, env, tenantAPI, ns, name, "{instanceRef: shared}")
	tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	uid := string(tn.GetUID())
	db := databaseOf(ctx, t, tenantAPI, ns, name)
	if tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)) == 0 {
		t.Fatal("the Ready Tenant has no delivery copy: nothing below would be proven")
	}

	deleteBindingAndRecompose(ctx, t, ns, name, db, uid, true)

	// The admin's rebind: clear the claim, wait until the Database is
	// Available, then set the claim to the Tenant.
	patchDatabase(ctx, t, db, `[{"op":"remove","path":"/spec/claimRef"}]`, types.JSONPatchType)
	waitUntil(ctx, t, "the Database Available after the admin cleared its claim", func() bool {
		return bindingPhase(ctx, t, db) == "Available"
	}, func() string { return tenantkit.Describe(context.Background(), env, tenantAPI, ns, name) })
	patchDatabase(ctx, t, db, fmt.Sprintf(`{"spec":{"claimRef":{"namespace":%q,"name":%q,"uid":%q}}}`, ns, name, uid), types.MergePatchType)
	tenantkit.WaitTenantReady(ctx, t, env, tenantAPI, ns, name)
	if p := bindingPhase(ctx, t, db); p != "Bound" {
		t.Errorf("after the admin's rebind the Database is %q, want Bound", p)
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name))

	// Released again, and the binding written again: the admin's deletion
	// of the Released Database does not wait for that binding. (The
	// Tenant's status is not checked again: after this much churn on one
	// Tenant, Crossplane core's watch circuit breaker may hold back the
	// event of the binding's new status, and with realtime compositions
	// nothing else renders the Tenant again soon.)
	deleteBindingAndRecompose(ctx, t, ns, name, db, uid, false)
	u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	// Gone, or replaced: the Tenant's binding, which holds nothing, makes
	// a new Database of the same name (its data was retained on the
	// server, so that one reports Conflict and takes nothing).
	// With Retain nothing is dropped: the deletion is done within a few
	// polls.
	gone, cancelGone := context.WithTimeout(ctx, 90*time.Second)
	defer cancelGone()
	waitUntil(gone, t, "the Released Database deleted by the admin goes", func() bool {
		n, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
		return apierrors.IsNotFound(err) || (err == nil && n.GetUID() != u.GetUID())
	}, func() string {
		u, _ := tenantkit.Get(context.Background(), env.Kube.Client, tenantAPI, "Database", "", db)
		if u == nil {
			return "no Database"
		}
		return fmt.Sprint(u.Object["status"])
	})
}

// deleteBindingAndRecompose is the app team's deletion of its Tenant's
// binding, then its Composition writing it again. The Tenant is paused
// first (crossplane.io/paused, which the app team may set), or Crossplane
// would make the ExternalSecret again at once and the binding would wait
// for it forever; the ExternalSecret and the binding are deleted, the
// Database must be Released with the claim kept and the delivery copy
// gone; then the Tenant is resumed, Crossplane writes the binding again
// through the function, and for a while (several Database polls) the
// Database stays Released, no copy is written, and the binding (and, with
// tenantShows, the Tenant) report Released.
func deleteBindingAndRecompose(ctx context.Context, t *testing.T, ns, name, db, uid string, tenantShows bool) {
	t.Helper()
	describe := func() string { return tenantkit.Describe(context.Background(), env, tenantAPI, ns, name) }
	annotateTenant(ctx, t, ns, name, `{"metadata":{"annotations":{"crossplane.io/paused":"true"}}}`)
	waitUntil(ctx, t, "the Tenant paused", func() bool {
		tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
		_, reason, _ := tenantkit.Condition(tn, "Synced")
		return err == nil && reason == "ReconcilePaused"
	}, describe)
	for _, o := range [][3]string{
		{"external-secrets.io/v1", "ExternalSecret", tenantkit.SecretName(name)},
		{tenantAPI, "DatabaseBinding", name},
	} {
		u, err := tenantkit.Get(ctx, env.Kube.Client, o[0], o[1], ns, o[2])
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Kube.Client.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
		waitUntil(ctx, t, o[1]+" gone", func() bool {
			_, err := tenantkit.Get(ctx, env.Kube.Client, o[0], o[1], ns, o[2])
			return apierrors.IsNotFound(err)
		}, describe)
	}
	waitUntil(ctx, t, "the Database Released", func() bool { return bindingPhase(ctx, t, db) == "Released" }, describe)
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 0 {
		t.Fatalf("the delivery copy survived the release (%d versions)", v)
	}

	annotateTenant(ctx, t, ns, name, `{"metadata":{"annotations":{"crossplane.io/paused":null}}}`)
	waitNudging(ctx, t, ns, name, "the binding written again, refused as Released, and the Tenant showing it", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "DatabaseBinding", ns, name)
		if err != nil {
			return false
		}
		_, reason, _ := tenantkit.Condition(b, "Ready")
		if reason != "Released" || !tenantShows {
			return reason == "Released"
		}
		tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
		r, _, _ := unstructured.NestedString(tn.Object, "status", "reason")
		return err == nil && r == "Released"
	}, describe)
	// Several polls of the Database (1 s) and of the binding.
	time.Sleep(6 * time.Second)
	u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "status", "binding", "phase"); p != "Released" {
		t.Errorf("the Database is %q with the Tenant's binding written again, want Released:\n%s", p, describe())
	}
	if got, _, _ := unstructured.NestedString(u.Object, "spec", "claimRef", "uid"); got != uid {
		t.Errorf("the claim changed to %q", got)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 0 {
		t.Errorf("the binding written again got a delivery copy (%d versions)", v)
	}
	b, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "DatabaseBinding", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, reason, msg := tenantkit.Condition(b, "Ready"); reason != "Released" || !strings.Contains(msg, "ask your platform team to rebind it to this Tenant") {
		t.Errorf("the binding says %s: %q, want Released and whom to ask", reason, msg)
	}
	if !tenantShows {
		return
	}
	tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if tenantkit.Ready(tn) == "True" {
		t.Error("the Tenant is Ready with its Database Released")
	}
	reason, _, _ := unstructured.NestedString(tn.Object, "status", "reason")
	msg, _, _ := unstructured.NestedString(tn.Object, "status", "message")
	if reason != "Released" || !strings.Contains(msg, "ask your platform team to rebind it to this Tenant") {
		t.Errorf("the Tenant says %s: %q, want Released and whom to ask", reason, msg)
	}
}

func annotateTenant(ctx context.Context, t *testing.T, ns, name, patch string) {
	t.Helper()
	tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Patch(ctx, tn, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func patchDatabase(ctx context.Context, t *testing.T, db, patch string, pt types.PatchType) {
	t.Helper()
	u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Patch(ctx, u, client.RawPatch(pt, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func bindingPhase(ctx context.Context, t *testing.T, db string) string {
	t.Helper()
	u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
	if err != nil {
		return err.Error()
	}
	p, _, _ := unstructured.NestedString(u.Object, "status", "binding", "phase")
	return p
}

// waitNudging is waitUntil for what Crossplane core must render: every
// 10 s it touches an annotation of the Tenant. This test's pause, deletions
// and rebind make many watch events on one Tenant in a short time, which
// opens core's watch circuit breaker for that Tenant (more than 100 events
// at once, closed again after 5 minutes); meanwhile core lets events
// through only now and then, and with realtime compositions an event it
// dropped (the pause lifted, the binding's new status) renders nothing
// until another comes.
func waitNudging(ctx context.Context, t *testing.T, ns, name, what string, ok func() bool, describe func() string) {
	t.Helper()
	last := time.Now()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("%s: timed out:\n%s", what, describe())
		}
		if time.Since(last) > 10*time.Second {
			annotateTenant(ctx, t, ns, name, fmt.Sprintf(`{"metadata":{"annotations":{"test.ayatori.ddupan.top/nudge":%q}}}`, time.Now().Format(time.RFC3339Nano)))
			last = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitUntil polls ok until it holds, failing with what describe says when
// ctx ends first.
func waitUntil(ctx context.Context, t *testing.T, what string, ok func() bool, describe func() string) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("%s: timed out:\n%s", what, describe())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
