package delivery

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

const (
	tenantAPI = "database.ayatori.ddupan.top/v1alpha1"
	legacyAPI = "legacy.database.ayatori.ddupan.top/v1alpha1"
)

// newTenant creates a Tenant (of apiVersion: the v2 composite or the legacy
// claim) in a fresh app namespace with the reader service account, and
// waits until it is Ready.
func newTenant(ctx context.Context, t *testing.T, apiVersion, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}
	tn := mustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", apiVersion, name, ns, spec))
	if err := env.Kube.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	for {
		xr, err := get(ctx, apiVersion, "Tenant", ns, name)
		if err != nil {
			t.Fatal(err)
		}
		p, _, _ := unstructured.NestedString(xr.Object, "status", "phase")
		if p == "Ready" && readyCondition(xr) == "True" {
			return xr
		}
		if ctx.Err() != nil {
			y, _ := yaml.Marshal(xr.Object["status"])
			t.Fatalf("Tenant %s/%s not Ready; status:\n%s\ncrossplane log:\n%s", ns, name, y, testenv.Tail(env.Crossplane.LogFile(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serverHas reports whether the database and the role exist on the server.
func serverHas(ctx context.Context, t *testing.T, database, role string) (bool, bool) {
	t.Helper()
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var db, r bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1), EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2)", database, role).Scan(&db, &r); err != nil {
		t.Fatal(err)
	}
	return db, r
}

func recordExists(ctx context.Context, t *testing.T, path string) bool {
	t.Helper()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	_, err = root.KVv2(env.OpenBao.KVMount).GetMetadata(ctx, path)
	return err == nil
}

// holdFinalizer keeps an ExternalSecret from going away, as a slow or
// stopped ESO (whose Secret cleanup the app must not outlive) would.
const holdFinalizer = "test.ayatori.ddupan.top/hold"

// deleteAndWatch deletes the Tenant and polls until its Database is gone,
// returning when the ExternalSecret and the Database were first seen gone.
// With hold, the ExternalSecret is held by a finalizer for a while first:
// the Database must not even start deleting during that time.
func deleteAndWatch(ctx context.Context, t *testing.T, apiVersion, ns, name string, hold bool) (esGone, dbGone time.Time) {
	t.Helper()
	es := "shared-" + name + "-postgresql"
	if hold {
		o, err := get(ctx, "external-secrets.io/v1", "ExternalSecret", ns, es)
		if err != nil {
			t.Fatal(err)
		}
		o.SetFinalizers(append(o.GetFinalizers(), holdFinalizer))
		if err := env.Kube.Client.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tn, err := get(ctx, apiVersion, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if hold {
		// Wait until the ExternalSecret is being deleted, then give the
		// Database every chance to be deleted too.
		for {
			o, err := get(ctx, "external-secrets.io/v1", "ExternalSecret", ns, es)
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
		db, err := get(ctx, tenantAPI, "Database", ns, name)
		if err != nil || db.GetDeletionTimestamp() != nil {
			t.Fatalf("the Database is being deleted (%v) while the ExternalSecret still exists", err)
		}
		if ok, _ := serverHas(ctx, t, name, name); !ok {
			t.Fatal("the database was dropped while the ExternalSecret still exists")
		}
		o, err := get(ctx, "external-secrets.io/v1", "ExternalSecret", ns, es)
		if err != nil {
			t.Fatal(err)
		}
		o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(f string) bool { return f == holdFinalizer }))
		if err := env.Kube.Client.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for esGone.IsZero() || dbGone.IsZero() {
		now := time.Now()
		if _, err := get(ctx, "external-secrets.io/v1", "ExternalSecret", ns, es); apierrors.IsNotFound(err) && esGone.IsZero() {
			esGone = now
		}
		if _, err := get(ctx, tenantAPI, "Database", ns, name); apierrors.IsNotFound(err) && dbGone.IsZero() {
			dbGone = now
		}
		if ctx.Err() != nil {
			t.Fatalf("after deleting the Tenant: ExternalSecret gone %v, Database gone %v; crossplane log:\n%s", !esGone.IsZero(), !dbGone.IsZero(), testenv.Tail(env.Crossplane.LogFile(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The Secret goes with its ExternalSecret (owner reference, garbage
	// collector); the Usage with the Tenant.
	for {
		err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: es}, &corev1.Secret{})
		_, terr := get(ctx, apiVersion, "Tenant", ns, name)
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

// The legacy claim goes the same way as the Tenant: Ready, and a Secret that
// logs in, in the claim's namespace.
func TestLegacyClaimEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	xr := newTenant(ctx, t, legacyAPI, "ledger", "ledger", "{instanceRef: shared}")
	if s, _, _ := unstructured.NestedString(xr.Object, "status", "credential", "secretRef", "name"); s != "shared-ledger-postgresql" {
		t.Errorf("claim status.credential.secretRef.name = %q", s)
	}
	checkSecretLogsIn(ctx, t, "ledger", "shared-ledger-postgresql")
}

// Retain (the default): deleting the Tenant removes the Kubernetes objects,
// the app's Secret first, and keeps the database, the role and the
// credential record.
func TestTenantDeletedWithRetain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newTenant(ctx, t, tenantAPI, "keep", "keep", "{instanceRef: shared}")
	esGone, dbGone := deleteAndWatch(ctx, t, tenantAPI, "keep", "keep", false)
	if dbGone.Before(esGone) {
		t.Errorf("the Database went (%s) before the ExternalSecret (%s)", dbGone.Format(time.StampMilli), esGone.Format(time.StampMilli))
	}
	if db, role := serverHas(ctx, t, "keep", "keep"); !db || !role {
		t.Errorf("Retain: database kept %v, role kept %v", db, role)
	}
	if !recordExists(ctx, t, "postgresql-tenants/keep/keep") {
		t.Error("Retain: the credential record is gone")
	}
}

// Delete: the Database is not even deleted while the ExternalSecret (held
// by a finalizer here) exists, thanks to the composed Usage; then the
// database, the role and every version of the record are gone.
func TestTenantDeletedWithDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newTenant(ctx, t, tenantAPI, "drop", "drop", "{instanceRef: shared, deletionPolicy: Delete}")
	esGone, dbGone := deleteAndWatch(ctx, t, tenantAPI, "drop", "drop", true)
	if dbGone.Before(esGone) {
		t.Errorf("the Database went (%s) before the ExternalSecret (%s)", dbGone.Format(time.StampMilli), esGone.Format(time.StampMilli))
	}
	if db, role := serverHas(ctx, t, "drop", "drop"); db || role {
		t.Errorf("Delete: database still there %v, role still there %v", db, role)
	}
	if recordExists(ctx, t, "postgresql-tenants/drop/drop") {
		t.Error("Delete: the credential record is still there")
	}
}
