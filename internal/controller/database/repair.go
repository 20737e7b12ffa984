package database

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// repairOf makes one repair of the verdict.
type repairOf func(e *external, ctx context.Context, db *v1alpha1.Database, o *observation) error

// repairs is how each repair of the verdict is made. None sets a new
// password: the record's is the truth.
var repairs = map[tenancy.Repair]repairOf{
	tenancy.RepairKVRecord: (*external).repairRecord,
	tenancy.RepairOwnerMetadata: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.kv.SetOwner(ctx, o.names.path, e.ownerMeta(o.owner.R.OID, o.owner.DB.OID))
	},
	tenancy.RepairAdminMember: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.pool.GrantRoleToAdmin(ctx, o.names.role)
	},
	tenancy.RepairRole: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.pool.RepairRole(ctx, o.names.role)
	},
	tenancy.RepairPassword: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.restorePassword(ctx, o.names, o.owner.KV)
	},
	tenancy.RepairDatabase: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.pool.RepairDatabase(ctx, o.names.database, o.names.role)
	},
	tenancy.RepairLimits: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.pool.SetRoleLimits(ctx, o.names.role, o.names.database, tenancy.DecideLimits(o.owner.Limits, o.owner.R.Limits))
	},
	tenancy.RepairOwner: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.pool.SetDatabaseOwner(ctx, o.names.database, o.names.role)
	},
	tenancy.RepairConnect: func(e *external, ctx context.Context, _ *v1alpha1.Database, o *observation) error {
		return e.pool.RestrictConnect(ctx, o.names.database, o.names.role)
	},
	tenancy.RepairExtensions: func(e *external, ctx context.Context, db *v1alpha1.Database, o *observation) error {
		return e.installExtensions(ctx, db, o.names, o.owner.KV.Data["password"], o.exts)
	},
}

// repair repairs non-destructive drift of what is this Database's own, in
// the verdict's order; nothing when the verdict holds it back.
func (e *external) repair(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	v := o.verdict
	if len(v.Repairs) == 0 || v.Reason == tenancy.ReasonConflict || refusesDelete(v.Reason) || v.Reason == tenancy.ReasonDatabaseVanished || (o.owner.Import && !o.owner.ImportUpdate) {
		return nil
	}
	// Every attempt is logged: a repair that does not hold shows up as
	// the same repair again at each poll.
	e.log.Info("Repairing drift", "repairs", tenancy.JoinRepairs(v.Repairs))
	if err := e.step(StepRepair); err != nil {
		return failFrom(db, StepRepair, err)
	}
	for _, r := range v.Repairs {
		fn, ok := repairs[r]
		if !ok {
			continue
		}
		if err := fn(e, ctx, db, o); err != nil {
			return failFrom(db, "repair: "+string(r), err)
		}
	}
	e.record.Event(db, event.Normal("DriftRepaired", "repaired: "+tenancy.JoinRepairs(v.Repairs)))
	if e.confirm != nil {
		e.confirm.Repaired(db.GetUID())
	}
	return nil
}

// repairRecord writes the record again as the Database keeps it. Its own
// password is kept: it is the truth, which RepairPassword gives the role
// when it refuses it; a record that lost it gets the working one back.
func (e *external) repairRecord(ctx context.Context, _ *v1alpha1.Database, o *observation) error {
	pw := o.owner.KV.Data["password"]
	if pw == "" {
		var err error
		if pw, err = e.workingPassword(ctx, o.names, o.owner.KV); err != nil {
			return err
		}
	}
	data := e.wantData(o.names)
	data["password"] = pw
	_, err := e.kv.Write(ctx, o.names.path, data, o.owner.KV.Version)
	return err
}

// workingPassword returns the password to keep in a repaired record whose
// current version lost it (deleted, or written without one): the newest
// earlier version's password that still logs in as the role, or, when none
// does, the newest earlier version's password (the record is the truth:
// the role gets it back at the next observation). The provider never makes
// up a new password for an existing role (a credential rotation, requested
// by an admin, is the only exception).
func (e *external) workingPassword(ctx context.Context, n names, kv tenancy.KVState) (string, error) {
	newest := ""
	for v := kv.Version - 1; v >= 1 && v >= kv.Version-10; v-- {
		data, err := e.kv.ReadVersion(ctx, n.path, v)
		if err != nil {
			return "", err
		}
		if data["password"] == "" {
			continue
		}
		if newest == "" {
			newest = data["password"]
		}
		c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: data["password"]})
		if err != nil {
			continue
		}
		_ = c.Close(ctx)
		return data["password"], nil
	}
	if newest != "" {
		return newest, nil
	}
	return "", errors.New("the credential record lost its password and no earlier version (up to 10 back) has one: restore it in OpenBao by hand (any version with the role's password), or request a credential rotation")
}

// restorePassword gives the role the password of its credential record
// (as a SCRAM-SHA-256 verifier), never using the password the role has
// now: someone changed it, and the record is the truth. Sessions opened
// with the other password are left alone (they may be the app's own); a
// rotation with terminateSessions ends them.
func (e *external) restorePassword(ctx context.Context, n names, kv tenancy.KVState) error {
	pw := kv.Data["password"]
	if pw == "" || tenancy.PasswordWithheld(pw) {
		return errors.New("the credential record's password was not read; the next observation reads it")
	}
	verifier, err := scram.Verifier(pw)
	if err != nil {
		return err
	}
	return e.pool.SetRolePassword(ctx, n.role, verifier)
}
