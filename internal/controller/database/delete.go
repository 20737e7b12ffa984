package database

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// delete runs only for reclaim policy Delete with Delete in the management
// policies, once the claim is released. It removes only what is provably
// this Database's own: block logins, end sessions, drop the database and
// the role, delete every KV version, and read back absence. Any failure
// keeps the finalizer; the next attempt starts again from the ownership
// check of Observe.
func (e *external) delete(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	if !e.drop {
		// Never reached (Observe reports nothing to delete); kept so that
		// no other path drops anything.
		return nil
	}
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseDeleting
	db.SetConditions(xpv2.Deleting())
	if err := e.mayDelete(ctx, db, o); err != nil {
		return err
	}
	if err := e.dropOwner(ctx, db, o); err != nil {
		return err
	}
	if err := e.dropRecords(ctx, db, o); err != nil {
		return err
	}
	// Read back the absence of what was ours.
	v, n := o.verdict, o.names
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return failFrom(db, "read back", err)
	}
	if (v.DBOurs && cat.DatabaseExists) || (v.RoleOurs && cat.RoleExists) {
		return fail(db, tenancy.ReasonProvisioningFailed, "the database or role still exists after dropping it; retrying")
	}
	e.record.Event(db, event.Normal("Deleted", fmt.Sprintf("dropped what this Database owned (database %v, role %v, credential %v)", v.DBOurs, v.RoleOurs, v.KVOurs)))
	return nil
}

// mayDelete refuses a deletion that could not finish, before anything is
// dropped, and records the role's OID first where blocking its logins
// ends the login proof.
func (e *external) mayDelete(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	v, n := o.verdict, o.names
	if refusesDelete(v.Reason) {
		return fail(db, v.Reason, "cannot delete: "+v.Message)
	}
	if v.RoleOurs && !o.owner.R.AdminCanAdmin {
		// Dropping the role would fail after the database is gone: drop
		// nothing until the admin may drop everything that is ours.
		return fail(db, tenancy.ReasonInsufficientPrivileges, fmt.Sprintf("cannot delete: the admin role may not drop the role %q (PostgreSQL 16 and later require ADMIN OPTION on it): as a superuser or the role's creator, run GRANT %q TO <the admin role> WITH ADMIN OPTION; nothing was dropped", n.role, n.role))
	}
	if v.RoleOurs && v.KVOurs && !o.owner.Import {
		// Blocking logins ends the login proof: the role's OID must be on
		// record first, so a retry still knows the role is ours.
		var dbOID uint32
		if v.DBOurs {
			dbOID = o.owner.DB.OID
		}
		return e.recordOIDs(ctx, db, n.path, o.owner.KV.Owner, o.owner.R.OID, dbOID)
	}
	return nil
}

// dropOwner ends the role's sessions, drops the database and the role,
// each only when provably this Database's.
func (e *external) dropOwner(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	v, n := o.verdict, o.names
	// Ending a role's sessions and dropping what it owns need membership
	// in it (an imported role, or one whose membership was revoked).
	if v.RoleOurs && !o.owner.R.AdminMember {
		if err := e.do(db, StepRole, func() error { return e.pool.GrantRoleToAdmin(ctx, n.role) }); err != nil {
			return err
		}
	}
	// An imported role is proven only by its login, so its logins are not
	// blocked (DROP DATABASE ... WITH (FORCE) still ends the sessions).
	if v.RoleOurs && !o.owner.Import {
		if err := e.do(db, StepBlockLogins, func() error { return e.pool.BlockLogins(ctx, n.role) }); err != nil {
			return err
		}
	}
	if v.DBOurs {
		if err := e.do(db, StepTerminate, func() error { _, err := e.pool.TerminateSessions(ctx, n.database, n.role); return err }); err != nil {
			return err
		}
		if err := e.do(db, StepDropDatabase, func() error { return e.pool.DropDatabase(ctx, n.database, n.role) }); err != nil {
			return err
		}
	}
	if v.RoleOurs {
		return e.do(db, StepDropRole, func() error { return e.pool.DropRole(ctx, n.role) })
	}
	return nil
}

// dropRecords drops the data roles, after their database (their grants
// went with it) and before the record that lists them, then deletes the
// records that are this Database's.
func (e *external) dropRecords(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	v, n := o.verdict, o.names
	if (v.KVOurs && !o.owner.Import) || o.roles.ours {
		if err := e.dropDataRoles(ctx, db, o, v.DBOurs); err != nil {
			return err
		}
	}
	if o.owner.Import && o.roles.ours {
		if err := e.do(db, StepDataRoleDelete, func() error { return e.kv.Delete(ctx, n.roles) }); err != nil {
			return err
		}
	}
	if v.KVOurs {
		return e.do(db, StepDeleteKV, func() error { return e.kv.Delete(ctx, n.path) })
	}
	return nil
}
