package main

import (
	"context"
	"fmt"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// tenantFloorSteps follow floorSteps for a Tenant: the binding's delivery
// copy.
var tenantFloorSteps = []string{"delivery copy"}

type tenantFloorResult struct {
	N     int
	Total time.Duration
	Steps map[string]time.Duration
	CPU   cpuShare
}

// runTenantFloor does, per tenant and sequentially, the external work of a
// Tenant with the provider's own clients: the Database's create work
// (floorTenant: record, role, database, grants, extension login, verify
// login), then what the binding controller does in OpenBao to deliver the
// credential: read the Database's record and the delivery path, decide
// (tenancy.DecideDelivery), claim the path, write the copy with
// check-and-set, and record its ownership. Kubernetes, Crossplane and ESO
// are left out: they are the stack's own cost and count against it.
func runTenantFloor(ctx context.Context, b *benchEnv, n int) (*tenantFloorResult, error) {
	pool, kv, closeFloor, err := floorClients(ctx, b)
	if err != nil {
		return nil, err
	}
	defer closeFloor()
	r := &tenantFloorResult{N: n, Steps: map[string]time.Duration{}}
	cpu0 := sampleCPU()
	start := time.Now()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%04d", i)
		if err := floorTenant(ctx, pool, kv, b, name, r.Steps); err != nil {
			return nil, err
		}
		t := time.Now()
		if err := floorDelivery(ctx, kv, tenantNamespace(i), tenantName(i), name); err != nil {
			return nil, err
		}
		r.Steps["delivery copy"] += time.Since(t)
	}
	r.Total = time.Since(start)
	r.CPU = sampleCPU().sub(cpu0)
	return r, nil
}

// floorDelivery is the binding controller's delivery of Database db's
// record to Tenant ns/tenant: two reads, the decision, the claim, the
// check-and-set write and the ownership metadata.
func floorDelivery(ctx context.Context, kv *openbao.Client, ns, tenant, db string) error {
	spec := tenancy.BindingSpec{Namespace: ns, Name: tenant, UID: "binding-" + tenant, TenantName: tenant, TenantUID: "tenant-" + tenant}
	o := tenancy.DeliveryObservation{
		Spec: spec, DatabaseName: db, DatabaseUID: "db-" + db,
		SourcePath: tenancy.CredentialPath(options.DefaultDatabaseBasePath, db),
		CopyPath:   tenancy.DeliveryPath(options.DefaultTenantBasePath, ns, tenant),
		// The floor's record carries no ownership metadata (floorTenant
		// leaves those writes out), as an imported record would.
		Import: true,
	}
	for _, rd := range []struct {
		path string
		to   *tenancy.BindingKV
	}{{o.SourcePath, &o.Source}, {o.CopyPath, &o.Copy}} {
		rec, err := kv.Read(ctx, rd.path)
		if err != nil {
			return err
		}
		if rec != nil {
			*rd.to = tenancy.BindingKV{Present: true, Data: rec.Data, Owner: rec.Owner, Version: rec.Version}
		}
	}
	v := tenancy.DecideDelivery(o)
	if !v.Write {
		return fmt.Errorf("delivery of %s to %s/%s: %s %s", db, ns, tenant, v.Reason, v.Message)
	}
	if v.Claim {
		if err := kv.ClaimPath(ctx, o.CopyPath, v.Owner); err != nil {
			return err
		}
	}
	if _, err := kv.Write(ctx, o.CopyPath, v.Data, v.CAS); err != nil {
		return err
	}
	return kv.SetOwner(ctx, o.CopyPath, v.Owner)
}
