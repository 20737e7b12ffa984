package database

import (
	"context"

	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/password"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// provisioning is what each of Create's steps hands on to the next.
type provisioning struct {
	// owner is the record's ownership metadata as last written; password
	// the record's password.
	owner    map[string]string
	password string
	// cat is the catalog as the last step read it back.
	cat postgres.Catalog
}

// provisionStep is one step of Create: it writes only what the
// observation shows missing, and reads back what it wrote.
type provisionStep func(e *external, ctx context.Context, db *v1alpha1.Database, o *observation, p *provisioning) error

// provisionSteps are Create's steps in the documented order, each
// confirmed before the next. The extensions' availability was checked by
// Observe, before any write.
var provisionSteps = []provisionStep{
	(*external).provisionCredential,
	(*external).provisionRole,
	(*external).provisionDatabase,
	(*external).provisionConnect,
	(*external).provisionExtensions,
}

// create provisions in the documented order, resuming after whatever an
// earlier attempt finished.
func (e *external) create(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	v := o.verdict
	if v.Reason != "" {
		return errors.New(v.Message)
	}
	if v.Phase == v1alpha1.DatabasePhasePlanned && !v.KVOurs {
		e.record.Event(db, event.Normal("ProvisioningStarted", fmt.Sprintf("provisioning database %q with login role %q", o.names.database, o.names.role)))
	}
	p := &provisioning{}
	for _, s := range provisionSteps {
		if err := s(e, ctx, db, o, p); err != nil {
			return err
		}
	}
	// The hook can also end the reconcile after the last write.
	return e.do(db, StepCreated, func() error { return nil })
}

// provisionCredential: ownership metadata first (only on an absent path),
// then the first version with check-and-set 0, then read back. An own
// record is always reused: never a second password.
func (e *external) provisionCredential(ctx context.Context, db *v1alpha1.Database, o *observation, p *provisioning) error {
	n := o.names
	if o.verdict.KVOurs {
		p.owner = o.owner.KV.Owner
	} else {
		p.owner = tenancy.OwnerMetadata(e.id)
		if r := db.Spec.CredentialRotation; r != nil {
			// The first password counts as the rotation the new Database
			// names: creating a Database never rotates.
			for k, v := range tenancy.RotationCreated(r.ID, time.Now().UTC().Format(time.RFC3339)) {
				p.owner[k] = v
			}
		}
		if err := e.do(db, StepOwnerMetadata, func() error { return e.kv.SetOwner(ctx, n.path, p.owner) }); err != nil {
			return err
		}
	}
	p.password = o.owner.KV.Data["password"]
	if p.password == "" {
		if err := e.writeFirstVersion(ctx, db, n, p); err != nil {
			return err
		}
	}
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseCredentialCreated
	return nil
}

// writeFirstVersion writes the record's first version with a new password
// (check-and-set 0) and reads it back.
func (e *external) writeFirstVersion(ctx context.Context, db *v1alpha1.Database, n names, p *provisioning) error {
	if err := e.step(StepCredential); err != nil {
		return failFrom(db, StepCredential, err)
	}
	pw, err := NewPassword()
	if err != nil {
		return failFrom(db, StepCredential, err)
	}
	data := e.wantData(n)
	data["password"] = pw
	if _, err := e.kv.Write(ctx, n.path, data, 0); err != nil {
		return failFrom(db, StepCredential, err)
	}
	rec, err := e.kv.Read(ctx, n.path)
	if err != nil {
		return failFrom(db, StepCredential, err)
	}
	if rec == nil || rec.Data["password"] != data["password"] || !tenancy.KVOurs(tenancy.KVState{Present: true, Owner: rec.Owner}, e.id) {
		return fail(db, tenancy.ReasonProvisioningFailed, "the credential read back from OpenBao is not the one written; retrying from the ownership check")
	}
	p.password, p.owner = data["password"], rec.Owner
	return nil
}

// provisionRole makes the role with a SCRAM verifier and its limits, or
// makes the admin a member of an existing one, and records its OID.
func (e *external) provisionRole(ctx context.Context, db *v1alpha1.Database, o *observation, p *provisioning) error {
	n := o.names
	if !o.owner.R.Exists {
		if err := e.step(StepRole); err != nil {
			return failFrom(db, StepRole, err)
		}
		verifier, err := scram.Verifier(p.password)
		if err != nil {
			return fail(db, tenancy.ReasonProvisioningFailed, err.Error())
		}
		if err := e.pool.CreateRoleWithLimits(ctx, n.role, verifier, o.owner.Limits); err != nil {
			return failFrom(db, StepRole, err)
		}
	} else if !o.owner.R.AdminMember {
		if err := e.pool.GrantRoleToAdmin(ctx, n.role); err != nil {
			return failFrom(db, StepRole, err)
		}
	}
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return failFrom(db, StepRole, err)
	}
	if err := e.recordOIDs(ctx, db, n.path, p.owner, cat.RoleOID, 0); err != nil {
		return err
	}
	p.cat = cat
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseRoleCreated
	return nil
}

// provisionDatabase makes the database, owned by the role, with the
// checked options, and records its OID in the record's metadata.
func (e *external) provisionDatabase(ctx context.Context, db *v1alpha1.Database, o *observation, p *provisioning) error {
	n := o.names
	if !o.owner.DB.Exists {
		if err := e.do(db, StepDatabase, func() error { return e.pool.CreateDatabaseWith(ctx, n.database, n.role, o.createOpts) }); err != nil {
			return err
		}
	}
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return failFrom(db, StepDatabase, err)
	}
	if !cat.DatabaseExists || cat.Owner != n.role {
		return fail(db, tenancy.ReasonProvisioningFailed, fmt.Sprintf("database %q is not owned by %q after creating it", n.database, n.role))
	}
	if err := e.recordOIDs(ctx, db, n.path, p.owner, cat.RoleOID, cat.DatabaseOID); err != nil {
		return err
	}
	p.cat = cat
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseDatabaseCreated
	db.Status.AtProvider.DatabaseOID = int64(cat.DatabaseOID)
	return nil
}

// provisionConnect gives CONNECT to the role only, ends other roles'
// sessions, then lets the database accept connections (it was created
// accepting none).
func (e *external) provisionConnect(ctx context.Context, db *v1alpha1.Database, o *observation, p *provisioning) error {
	if !p.cat.PublicConnect && p.cat.RoleConnect && p.cat.AllowConn {
		return nil
	}
	return e.do(db, StepConnect, func() error { return e.pool.RestrictConnect(ctx, o.names.database, o.names.role) })
}

// provisionExtensions installs the extensions as the owner over a real
// login as the role, which is also the final proof that the credential
// works.
func (e *external) provisionExtensions(ctx context.Context, db *v1alpha1.Database, o *observation, p *provisioning) error {
	return e.installExtensions(ctx, db, o.names, p.password, o.exts)
}

// passwords is the shape of every tenant password: 32 characters of
// [A-Za-z0-9] (about 190 bits) from crypto/rand; ASCII only, so SASLprep
// leaves it unchanged.
var passwords = password.Settings{
	CharacterSet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	Length:       32,
}

// NewPassword returns a fresh tenant password (see passwords).
func NewPassword() (string, error) { return passwords.Generate() }
