package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
}
