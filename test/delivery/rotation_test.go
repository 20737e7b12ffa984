package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// A Ready Tenant's binder does not read the Database's record and the
// delivery copy from OpenBao at every poll while the Database controller
// proves the same record version; a rotation of the Database's credential
// moves that version, and the copy follows it.
func TestDeliveryIsReadWhenTheRecordMoves(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "steady", "steady"
	tenantkit.NewTenant(ctx, t, env, tenantkit.TenantAPI, ns, name, "{instanceRef: shared}")
	database := tenantkit.DatabaseName(ctx, env, ns, name)

	time.Sleep(3 * time.Second)
	read := testutil.ToFloat64(metrics.DeliveryChecks.WithLabelValues("read"))
	skipped := testutil.ToFloat64(metrics.DeliveryChecks.WithLabelValues("skipped"))
	time.Sleep(6 * time.Second) // 6 polls
	if n := testutil.ToFloat64(metrics.DeliveryChecks.WithLabelValues("read")) - read; n != 0 {
		t.Errorf("the binders read the record and the copy %v times in 6 polls with nothing changed, want 0", n)
	}
	if n := testutil.ToFloat64(metrics.DeliveryChecks.WithLabelValues("skipped")) - skipped; n < 3 {
		t.Errorf("%v binding Observes relied on the last reading in 6 polls, want at least 3 (is the binding still observed?)", n)
	}

	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	kv := root.KVv2(env.OpenBao.KVMount)
	password := func(path string) string {
		s, err := kv.Get(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := s.Data["password"].(string)
		return p
	}
	before := password(tenantkit.DeliveryPath(ns, name))
	if before == "" || before != password(tenantkit.RecordPath(database)) {
		t.Fatal("the delivery copy does not hold the record's password before the rotation")
	}
	patch := []byte(`{"spec":{"credentialRotation":{"id":"first"}}}`)
	db := tenantkit.MustUnstructured("apiVersion: " + tenantkit.TenantAPI + "\nkind: Database\nmetadata: {name: " + database + "}\n")
	if err := env.Kube.Client.Patch(ctx, db, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	for {
		now := password(tenantkit.DeliveryPath(ns, name))
		if now != before && now == password(tenantkit.RecordPath(database)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the delivery copy did not follow the rotation (copy changed: %v, copy equals the record: %v):\n%s",
				now != before, now == password(tenantkit.RecordPath(database)), tenantkit.Describe(context.Background(), env, tenantkit.TenantAPI, ns, name))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The app's Secret follows within seconds, though its ExternalSecret
	// refreshes only every hour: the binding shows the record version the
	// copy holds, the Tenant's ExternalSecret carries it as an annotation,
	// and ESO syncs an ExternalSecret whose annotations changed.
	meta, err := kv.GetMetadata(ctx, tenantkit.RecordPath(database))
	if err != nil {
		t.Fatal(err)
	}
	after := password(tenantkit.RecordPath(database))
	es := &unstructured.Unstructured{}
	es.SetAPIVersion("external-secrets.io/v1")
	es.SetKind("ExternalSecret")
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenantkit.SecretName(name)}, es); err != nil {
		t.Fatal(err)
	}
	if ri, _, _ := unstructured.NestedString(es.Object, "spec", "refreshInterval"); ri != "1h" {
		t.Fatalf("the ExternalSecret refreshes every %q: an hour would prove the Secret did not follow by its refresh", ri)
	}
	follow, cancelFollow := context.WithTimeout(ctx, time.Minute)
	defer cancelFollow()
	for {
		sec := &corev1.Secret{}
		err := env.Kube.Client.Get(follow, client.ObjectKey{Namespace: ns, Name: tenantkit.SecretName(name)}, sec)
		if err == nil && string(sec.Data["password"]) == after {
			break
		}
		if follow.Err() != nil {
			b, _ := tenantkit.Get(context.Background(), env.Kube.Client, tenantkit.TenantAPI, "DatabaseBinding", ns, name)
			v, _, _ := unstructured.NestedFieldNoCopy(b.Object, "status", "atProvider", "credential", "version")
			_ = env.Kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tenantkit.SecretName(name)}, es)
			t.Fatalf("the app's Secret still holds the old password a minute after the rotation (record version %d, binding shows %v, ExternalSecret annotations %v)",
				meta.CurrentVersion, v, es.GetAnnotations())
		}
		time.Sleep(500 * time.Millisecond)
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name))
}
