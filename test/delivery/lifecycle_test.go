package delivery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

const (
	tenantAPI = tenantkit.TenantAPI
	legacyAPI = tenantkit.LegacyAPI
)

// holdFinalizer keeps an ExternalSecret from going away, as a slow or
// stopped ESO (whose Secret cleanup the app must not outlive) would.
const holdFinalizer = "test.ayatori.ddupan.top/hold"

// deleteAndWatch deletes the Tenant and polls until its DatabaseBinding is
// gone, returning when the ExternalSecret and the binding were first seen
// gone. With hold, the ExternalSecret is held by a finalizer for a while
// first: the binding must not even start releasing during that time.
func deleteAndWatch(ctx context.Context, t *testing.T, apiVersion, instance, ns, name string, hold bool) (esGone, bindingGone time.Time) {
	var dbGone time.Time
	t.Helper()
	es := tenantkit.InstanceSecretName(instance, name)
	if hold {
		// ESO and Crossplane write it too: the edit is made again on a
		// conflict.
		testenv.Edit(t, env.Kube.Client, tenantkit.Ref("external-secrets.io/v1", "ExternalSecret", ns, es), func(o *unstructured.Unstructured) {
			o.SetFinalizers(append(o.GetFinalizers(), holdFinalizer))
		})
	}
	tn, err := tenantkit.Get(ctx, env.Kube.Client, apiVersion, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if hold {
		// Wait until the ExternalSecret is being deleted, then give the
		// binding every chance to be deleted too.
		for {
			o, err := tenantkit.Get(ctx, env.Kube.Client, "external-secrets.io/v1", "ExternalSecret", ns, es)
			if err != nil {
				t.Fatal(err)
			}
			if o.GetDeletionTimestamp() != nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the ExternalSecret was never deleted")
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		// The binding may be being deleted, but it waits: it is there,
		// says what it waits for, and has released nothing.
		b, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "DatabaseBinding", ns, name)
		if err != nil {
			t.Fatalf("the binding went while the ExternalSecret still exists: %v", err)
		}
		if b.GetDeletionTimestamp() != nil {
			if msg := conditionMessage(b, "Synced"); !strings.Contains(msg, "waiting for ExternalSecret "+es) {
				t.Errorf("the binding being deleted says %q, want it waiting for ExternalSecret %s", msg, es)
			}
		}
		if ok, _ := tenantkit.ServerHas(ctx, t, env, name, name); !ok {
			t.Fatal("the database was dropped while the ExternalSecret still exists")
		}
		if p := releasedPhase(ctx, t, b); p != "" {
			t.Fatalf("the Database was released (%s) while the ExternalSecret still exists", p)
		}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: es}, &corev1.Secret{}); err != nil {
			t.Fatalf("the Secret went while its ExternalSecret still exists: %v", err)
		}
		testenv.Edit(t, env.Kube.Client, tenantkit.Ref("external-secrets.io/v1", "ExternalSecret", ns, es), func(o *unstructured.Unstructured) {
			o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(f string) bool { return f == holdFinalizer }))
		})
	}
	for esGone.IsZero() || dbGone.IsZero() {
		now := time.Now()
		if _, err := tenantkit.Get(ctx, env.Kube.Client, "external-secrets.io/v1", "ExternalSecret", ns, es); apierrors.IsNotFound(err) && esGone.IsZero() {
			esGone = now
		}
		if _, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "DatabaseBinding", ns, name); apierrors.IsNotFound(err) && dbGone.IsZero() {
			dbGone = now
		}
		if ctx.Err() != nil {
			t.Fatalf("after deleting the Tenant: ExternalSecret gone %v, binding gone %v; crossplane log:\n%s", !esGone.IsZero(), !dbGone.IsZero(), testenv.Tail(env.Crossplane.LogFile(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The Secret goes with its ExternalSecret (owner reference, garbage
	// collector).
	for {
		err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: es}, &corev1.Secret{})
		_, terr := tenantkit.Get(ctx, env.Kube.Client, apiVersion, "Tenant", ns, name)
		if apierrors.IsNotFound(err) && apierrors.IsNotFound(terr) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after deleting the Tenant: Secret %v, Tenant %v", err, terr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return esGone, dbGone
}

// databaseOf is the name of the Database provisioned for the Tenant.
func databaseOf(ctx context.Context, t *testing.T, apiVersion, ns, name string) string {
	t.Helper()
	tn, err := tenantkit.Get(ctx, env.Kube.Client, apiVersion, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return "tenant-" + string(tn.GetUID())
}

// The legacy claim goes the same way as the Tenant: Ready, and a Secret that
// logs in, in the claim's namespace.
func TestLegacyClaimEndToEnd(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	xr := tenantkit.NewTenant(ctx, t, env, legacyAPI, "ledger", "ledger", "{instanceRef: shared}")
	if s, _, _ := unstructured.NestedString(xr.Object, "status", "credential", "secretRef", "name"); s != "shared-ledger-postgresql" {
		t.Errorf("claim status.credential.secretRef.name = %q", s)
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, "ledger", "shared-ledger-postgresql")
}

// Retain (the default): deleting the Tenant removes the Tenant's
// Kubernetes objects, the app's Secret first, and releases the Database:
// it stays, Released, with the database, the role and the credential
// record; only the namespace's copy of the credential goes.
func TestTenantDeletedWithRetain(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tenantkit.NewTenant(ctx, t, env, tenantAPI, "keep", "keep", "{instanceRef: shared}")
	db := databaseOf(ctx, t, tenantAPI, "keep", "keep")
	esGone, bindingGone := deleteAndWatch(ctx, t, tenantAPI, tenantkit.Instance, "keep", "keep", false)
	if bindingGone.Before(esGone) {
		t.Errorf("the binding went (%s) before the ExternalSecret (%s)", bindingGone.Format(time.StampMilli), esGone.Format(time.StampMilli))
	}
	if ok, role := tenantkit.ServerHas(ctx, t, env, "keep", "keep"); !ok || !role {
		t.Errorf("Retain: database kept %v, role kept %v", ok, role)
	}
	if tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(db)) == 0 {
		t.Error("Retain: the credential record is gone")
	}
	if tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath("keep", "keep")) != 0 {
		t.Error("Retain: the namespace's copy of the credential survived the release")
	}
	u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
	if err != nil {
		t.Fatalf("Retain: the Database is gone: %v", err)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "status", "binding", "phase"); p != "Released" {
		t.Errorf("Retain: the Database is %q, want Released", p)
	}
}

// Delete (the instance's default reclaim policy): the binding does not even
// start releasing while the ExternalSecret (held by a finalizer here)
// exists (the binding waits for it); then the Database is deleted and
// the database, the role and every version of the record are gone.
func TestTenantDeletedWithDelete(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tenantkit.NewTenant(ctx, t, env, tenantAPI, "drop", "drop", "{instanceRef: "+tenantkit.DeleteInstance+"}")
	db := databaseOf(ctx, t, tenantAPI, "drop", "drop")
	esGone, bindingGone := deleteAndWatch(ctx, t, tenantAPI, tenantkit.DeleteInstance, "drop", "drop", true)
	if bindingGone.Before(esGone) {
		t.Errorf("the binding went (%s) before the ExternalSecret (%s)", bindingGone.Format(time.StampMilli), esGone.Format(time.StampMilli))
	}
	for {
		_, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Delete: the Database %s is still there", db)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ok, role := tenantkit.ServerHas(ctx, t, env, "drop", "drop"); ok || role {
		t.Errorf("Delete: database still there %v, role still there %v", ok, role)
	}
	if tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(db)) > 0 {
		t.Error("Delete: the credential record is still there")
	}
}

// conditionMessage is the message of o's condition typ.
func conditionMessage(o *unstructured.Unstructured, typ string) string {
	cs, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			msg, _ := m["message"].(string)
			return msg
		}
	}
	return ""
}

// releasedPhase is the binding phase of the Database the binding b
// records, when that says Released or the Database is being deleted ("" if
// neither, or b records none).
func releasedPhase(ctx context.Context, t *testing.T, b *unstructured.Unstructured) string {
	t.Helper()
	name, _, _ := unstructured.NestedString(b.Object, "status", "atProvider", "databaseName")
	if name == "" {
		return ""
	}
	db, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", name)
	if err != nil {
		t.Fatalf("the bound Database %s: %v", name, err)
	}
	if db.GetDeletionTimestamp() != nil {
		return "being deleted"
	}
	if p, _, _ := unstructured.NestedString(db.Object, "status", "binding", "phase"); p == "Released" {
		return p
	}
	return ""
}
