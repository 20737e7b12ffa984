package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// exampleDataRoles are the data roles of examples/tenant/tenant.yaml, the
// Tenant the benchmark creates: the floor does their work too.
func exampleDataRoles() ([]floorDataRole, error) {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "tenant", "tenant.yaml"))
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, errors.New("examples/tenant/tenant.yaml must hold exactly one Tenant")
	}
	roles, _, err := unstructured.NestedSlice(objs[0].Object, "spec", "dataRoles")
	if err != nil {
		return nil, err
	}
	var out []floorDataRole
	for _, r := range roles {
		m, _ := r.(map[string]any)
		name, _ := m["name"].(string)
		access, _ := m["access"].(string)
		out = append(out, floorDataRole{name: name, access: postgres.Access(access)})
	}
	return out, nil
}

// tenantFloorSteps follow floorSteps for a Tenant: the binding's delivery
// copy, then, for each data role of the benchmarked Tenant, what the
// Database and the binding do for it.
var tenantFloorSteps = []string{"delivery copy", "data role: record", "data role: create role", "data role: grants", "data role: login", "data role: delivery copy"}

// dataRoleSteps are the tenantFloorSteps of the data roles: their sum per
// data role is the floor's cost of one.
var dataRoleSteps = tenantFloorSteps[1:]

// floorDataRole is one data role of the benchmarked Tenant.
type floorDataRole struct {
	name   string
	access postgres.Access
}

type tenantFloorResult struct {
	N     int
	Total time.Duration
	Steps map[string]time.Duration
	CPU   cpuShare
	// DataRoles is how many data roles each tenant had.
	DataRoles int
}

// runTenantFloor does, per tenant and sequentially, the external work of a
// Tenant with the provider's own clients: the Database's create work
// (floorTenant: record, role, database, grants, extension login, verify
// login), then what the binding controller does in OpenBao to deliver the
// credential: read the Database's record and the delivery path, decide
// (tenancy.DecideDelivery), claim the path, write the copy with
// check-and-set, and record its ownership. Kubernetes, Crossplane and ESO
// are left out: they are the stack's own cost and count against it.
func runTenantFloor(ctx context.Context, b *benchEnv, n int, roles []floorDataRole) (*tenantFloorResult, error) {
	pool, kv, closeFloor, err := floorClients(ctx, b)
	if err != nil {
		return nil, err
	}
	defer closeFloor()
	r := &tenantFloorResult{N: n, Steps: map[string]time.Duration{}, DataRoles: len(roles)}
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
		for _, dr := range roles {
			if err := floorDataRoleWork(ctx, pool, kv, b, tenantNamespace(i), tenantName(i), name, dr, r.Steps); err != nil {
				return nil, err
			}
		}
	}
	r.Total = time.Since(start)
	r.CPU = sampleCPU().sub(cpu0)
	return r, nil
}

// floorDataRoleWork does for one data role of database db (owned by the
// role db) what the Database and the binding do: its record written and
// read back, its role with the SCRAM verifier, the owner's grants, a login
// as it, and its delivery copy.
func floorDataRoleWork(ctx context.Context, pool *postgres.Pool, kv *openbao.Client, b *benchEnv, ns, tenant, db string, dr floorDataRole, steps map[string]time.Duration) error {
	lap := stepClock(steps)
	role := tenancy.DataRoleName(db, dr.name)
	path := tenancy.DataRolePath(tenancy.CredentialPath(options.DefaultDatabaseBasePath, db), dr.name)
	password, err := database.NewPassword()
	if err != nil {
		return err
	}
	if err := floorRecord(ctx, kv, b, path, role, db, password); err != nil {
		return err
	}
	lap("data role: record")
	verifier, err := scram.Verifier(password)
	if err != nil {
		return err
	}
	if err := pool.CreateRole(ctx, role, verifier); err != nil {
		return err
	}
	lap("data role: create role")
	if err := pool.GrantAccess(ctx, db, db, role, dr.access); err != nil {
		return err
	}
	lap("data role: grants")
	c, err := pool.ConnectAs(ctx, db, postgres.Credential{Username: role, Password: password})
	if err != nil {
		return err
	}
	if err := c.Close(ctx); err != nil {
		return err
	}
	lap("data role: login")
	if err := floorCopy(ctx, kv, ns, tenant, db, path, tenancy.DataRoleDeliveryPath(tenancy.DeliveryPath(options.DefaultTenantBasePath, ns, tenant), dr.name)); err != nil {
		return err
	}
	lap("data role: delivery copy")
	return nil
}

// floorDelivery is the binding controller's delivery of Database db's
// record to Tenant ns/tenant: two reads, the decision, the claim, the
// check-and-set write and the ownership metadata.
func floorDelivery(ctx context.Context, kv *openbao.Client, ns, tenant, db string) error {
	return floorCopy(ctx, kv, ns, tenant, db, tenancy.CredentialPath(options.DefaultDatabaseBasePath, db), tenancy.DeliveryPath(options.DefaultTenantBasePath, ns, tenant))
}

// floorCopy delivers the record at source to copyPath for Tenant
// ns/tenant of Database db, as the binder does.
func floorCopy(ctx context.Context, kv *openbao.Client, ns, tenant, db, source, copyPath string) error {
	spec := tenancy.BindingSpec{Namespace: ns, Name: tenant, UID: "binding-" + tenant, TenantName: tenant, TenantUID: "tenant-" + tenant}
	o := tenancy.DeliveryObservation{
		Spec: spec, DatabaseName: db, DatabaseUID: "db-" + db,
		SourcePath: source,
		CopyPath:   copyPath,
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
		return fmt.Errorf("delivery of %s to %s: %s %s", source, copyPath, v.Reason, v.Message)
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
