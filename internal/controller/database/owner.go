package database

import (
	"context"
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// ownerInput is the decision core's input from the spec and the catalog:
// everything but the record and the login.
func (e *external) ownerInput(db *v1alpha1.Database, n names, cat postgres.Catalog) tenancy.Observation {
	o := tenancy.Observation{
		Identity: e.id, Import: n.importing, ImportUpdate: n.importing && policies(db).ShouldUpdate(), Deleting: meta.WasDeleted(db),
		Database: n.database, Role: n.role, Path: n.path,
		Requested: db.Spec.ForProvider.Extensions,
		WantData:  e.wantData(n),
		Rotation:  rotationRequest(db),
		Cleanup:   cleanupRequest(db),
		DB: tenancy.DBState{Exists: cat.DatabaseExists, OID: cat.DatabaseOID, Owner: cat.Owner, AllowConn: cat.AllowConn, PublicConnect: cat.PublicConnect, RoleConnect: cat.RoleConnect,
			IsTemplate: cat.IsTemplate, ConnLimited: cat.DatabaseExists && cat.DatabaseConnLimit != -1},
		R: tenancy.RoleState{Exists: cat.RoleExists, OID: cat.RoleOID, AttributesOK: cat.RoleAttributesOK(), AdminMember: cat.AdminMember, AdminCanAdmin: cat.AdminCanAdmin,
			Elevated: cat.Superuser || cat.Replication || cat.BypassRLS, Limits: cat.RoleLimits()},
		Limits: tenancy.LimitsOf(e.cfgLimits, db.Spec.ForProvider.Limits),
	}
	if !n.importing {
		o.Limits = o.Limits.WithDefaultConnectionLimit(e.defaultConnLimit)
	}
	return o
}

// observeOwner reads the KV record (one request) and, when there is a role
// and a credential, logs in as the role to its database (one connection,
// which also lists the installed extensions), then lets the decision core
// judge. While the last proven login stands, it neither logs in nor reads
// the record: it uses the record kept with that login
// (tenancy.RememberedRecord), and reads it after all when the verdict finds
// anything to do.
func (e *external) observeOwner(ctx context.Context, db *v1alpha1.Database, n names, cat postgres.Catalog) (tenancy.Observation, tenancy.Verdict, error) {
	o := e.ownerInput(db, n, cat)
	now := time.Now()
	last := e.lastLogin(db)
	if remembered := e.rememberedRecord(o, cat, last, now); remembered != nil {
		// The last proven login stands with this record: what it proved
		// stands too.
		o.KV, o.Login, o.Installed = *remembered, tenancy.LoginOK, last.Installed
		if v := tenancy.Decide(o); tenancy.Steady(v) {
			metrics.RecordRemembered()
			metrics.LoginSkipped()
			return o, v, nil
		}
	}
	rec, err := e.kv.Read(ctx, n.path)
	if err != nil {
		return o, tenancy.Verdict{}, fail(db, tenancy.ReasonDependencyUnavailable, err.Error())
	}
	metrics.RecordRead()
	o.KV, o.Login, o.Installed = tenancy.KVState{}, tenancy.LoginNotTried, nil
	if rec != nil {
		o.KV = tenancy.KVState{Present: true, Owner: rec.Owner, Data: rec.Data, Version: rec.Version}
	}
	if cat.RoleExists && tenancy.MayLogin(o) {
		o.Login, o.Installed = e.loginIfDue(ctx, db, n, o, cat, last, now)
	}
	return o, tenancy.Decide(o), nil
}

// ownerMeta is the ownership metadata with the recorded OIDs (0: unknown).
func (e *external) ownerMeta(roleOID, dbOID uint32) map[string]string {
	m := tenancy.OwnerMetadata(e.id)
	if roleOID != 0 {
		m[tenancy.MetaRoleOID] = fmt.Sprint(roleOID)
	}
	if dbOID != 0 {
		m[tenancy.MetaDatabaseOID] = fmt.Sprint(dbOID)
	}
	return m
}

// recordOIDs writes the OIDs into the metadata of the record at path when
// they differ from have, and keeps have up to date.
func (e *external) recordOIDs(ctx context.Context, db *v1alpha1.Database, path string, have map[string]string, roleOID, dbOID uint32) error {
	want := e.ownerMeta(roleOID, dbOID)
	if have[tenancy.MetaRoleOID] == want[tenancy.MetaRoleOID] && have[tenancy.MetaDatabaseOID] == want[tenancy.MetaDatabaseOID] {
		return nil
	}
	if err := e.do(db, StepRecordOID, func() error { return e.kv.SetOwner(ctx, path, want) }); err != nil {
		return err
	}
	for k, v := range want {
		have[k] = v
	}
	return nil
}

// loginFingerprint is the state a login is made under: the catalog's and
// the record's version.
func loginFingerprint(cat postgres.Catalog, version int) string {
	return fmt.Sprintf("%s kv=%d", cat.LoginFingerprint(), version)
}

// lastLogin is the Database's last proven login, nil when none is known or
// the periodic check is off (every Observe logs in and reads the record).
func (e *external) lastLogin(db *v1alpha1.Database) *tenancy.ProvenLogin {
	if e.logins == nil || e.opts.LoginCheckInterval <= 0 {
		return nil
	}
	return e.logins.Get(db.GetUID())
}

// rememberedRecord is the record kept with the last proven login while that
// login stands, nil when the record must be read from OpenBao.
func (e *external) rememberedRecord(o tenancy.Observation, cat postgres.Catalog, last *tenancy.ProvenLogin, now time.Time) *tenancy.KVState {
	if !cat.RoleExists {
		return nil
	}
	return tenancy.RememberedRecord(o, tenancy.LoginCheck{Last: last, Now: now},
		func(version int) string { return loginFingerprint(cat, version) })
}

// loginIfDue logs in as the role, unless the last proven login (last, as
// Observe read it) still stands (tenancy.LoginDue): then it reports that
// login's result, and the server sees no new connection.
func (e *external) loginIfDue(ctx context.Context, db *v1alpha1.Database, n names, o tenancy.Observation, cat postgres.Catalog, last *tenancy.ProvenLogin, now time.Time) (tenancy.Login, []string) {
	check := tenancy.LoginCheck{Fingerprint: loginFingerprint(cat, o.KV.Version), Now: now, Last: last}
	if tenancy.LoginDue(o, check) == "" {
		metrics.LoginSkipped()
		return tenancy.LoginOK, check.Last.Installed
	}
	login, installed := e.login(ctx, n, o.KV.Data["password"])
	if login == tenancy.LoginLimitFull && last != nil {
		// No session to read the extensions: the last proven login's list
		// is the best known.
		installed = last.Installed
	}
	metrics.LoginMade()
	if f := tenancy.LoginFailure(login); f != "" {
		metrics.LoginFailed(f)
	}
	e.rememberLogin(db, o, check.Fingerprint, login, installed, now)
	return login, installed
}

// rememberLogin keeps a proven login until it is due again, and forgets
// any other.
func (e *external) rememberLogin(db *v1alpha1.Database, o tenancy.Observation, fingerprint string, login tenancy.Login, installed []string, now time.Time) {
	if e.logins == nil {
		return
	}
	if login != tenancy.LoginOK || e.opts.LoginCheckInterval <= 0 {
		e.logins.Forget(db.GetUID())
		return
	}
	p := tenancy.ProvenLogin{Fingerprint: fingerprint, Installed: installed,
		Due: tenancy.NextLoginDue(now, e.opts.LoginCheckInterval, e.logins.Spread())}
	if !o.Import {
		// An import reads its record at every Observe.
		rec := o.KV.WithoutPassword()
		p.Record = &rec
	}
	e.logins.Put(db.GetUID(), p, now)
}

// forgetLogin makes the next Observe log in: called before every write.
// A write on the Database (a rotation, a cleanup that revokes other roles'
// grants, a repair) is checked on its data roles too.
func (e *external) forgetLogin(db *v1alpha1.Database, roles roleList) {
	if e.logins == nil {
		return
	}
	e.logins.Forget(db.GetUID())
	names, _ := dataRoleNames(db, roles.meta)
	for _, name := range names {
		e.logins.Forget(memo.DataRoleKey(db.GetUID(), name))
	}
}

// login connects as the role to its database with the KV password.
func (e *external) login(ctx context.Context, n names, password string) (tenancy.Login, []string) {
	c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: password})
	if err != nil {
		return loginRefusal(err), nil
	}
	defer c.Close(ctx) //nolint:errcheck // read-only connection
	exts, err := c.Extensions(ctx)
	if err != nil {
		return tenancy.LoginUnavailable, nil
	}
	return tenancy.LoginOK, exts
}

// loginRefusal is what a failed login as the owner proves.
func loginRefusal(err error) tenancy.Login {
	var pe *postgres.Error
	if errors.As(err, &pe) {
		switch {
		case pe.SQLState == "3D000":
			return tenancy.LoginAuthOK
		case pe.SQLState == "55000":
			// The database accepts no connections: the server says so
			// only after authentication. Not a refused credential.
			return tenancy.LoginNotAccepting
		case postgres.LimitAfterAuthentication(err):
			// The role's (or the database's) connection limit is full,
			// checked after the password was accepted: whoever holds
			// the credential has every session it allows.
			return tenancy.LoginLimitFull
		case pe.Class == postgres.ClassAuthentication:
			return tenancy.LoginRefused
		}
	}
	return tenancy.LoginUnavailable
}
