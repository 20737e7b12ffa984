package database

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Steps of a data role (fault injection names).
const (
	StepDataRolesList  = "data-roles-list"
	StepDataRoleRecord = "data-role-record"
	StepDataRoleCreate = "data-role-create"
	StepDataRoleOID    = "data-role-oid"
	StepDataRoleRepair = "data-role-repair"
	StepDataRoleGrant  = "data-role-grant"
	StepDataRoleDrop   = "data-role-drop"
	StepDataRoleDelete = "data-role-delete-record"
	StepDataRoleRotate = "data-role-rotate"
	// StepDataRoleRotateRole runs between a data role rotation's new
	// version and setting it on the role.
	StepDataRoleRotateRole = "data-role-rotate-role"
)

// dataRole is one data role as Observe found it.
type dataRole struct {
	obs     tenancy.DataRoleObservation
	verdict tenancy.DataRoleVerdict
	limits  tenancy.EffectiveLimits
}

// dataRoleNames are the names to observe: the spec's, then those the
// Database's record lists and the spec no longer does.
func dataRoleNames(db *v1alpha1.Database, owner map[string]string) (names []string, wanted map[string]v1alpha1.DataRole) {
	wanted = map[string]v1alpha1.DataRole{}
	for _, r := range db.Spec.ForProvider.DataRoles {
		wanted[r.Name] = r
		names = append(names, r.Name)
	}
	for _, name := range tenancy.RecordedDataRoles(owner) {
		if _, ok := wanted[name]; !ok && tenancy.ValidIdentifier(name) {
			names = append(names, name)
		}
	}
	return names, wanted
}

// roleList is what lists a Database's data roles (names.roles): that
// entry's metadata, and whether it is this Database's.
type roleList struct {
	meta map[string]string
	ours bool
}

// readRoleList reads what lists the data roles: the Database's own
// record's metadata, already read; for an import with Update, the entry of
// its own at names.roles (one read per Observe). A read-only import has
// none: it never gets data roles.
func (e *external) readRoleList(ctx context.Context, n names, owner tenancy.Observation) (roleList, error) {
	if n.roles == n.path {
		if tenancy.KVOurs(owner.KV, e.id) {
			return roleList{meta: owner.KV.Owner, ours: true}, nil
		}
		return roleList{}, nil
	}
	if !owner.ImportUpdate {
		return roleList{}, nil
	}
	rec, err := e.kv.Read(ctx, n.roles)
	if err != nil || rec == nil {
		return roleList{}, err
	}
	return roleList{meta: rec.Owner, ours: tenancy.KVOurs(tenancy.KVState{Present: true, Owner: rec.Owner}, e.id)}, nil
}

// observeDataRolesOf observes the data roles once the owner is Ready (they
// are granted the owner's data) and folds their verdicts into the
// Database's.
func (e *external) observeDataRolesOf(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	v := o.verdict
	if meta.WasDeleted(db) || !v.Ready || (o.owner.Import && !o.owner.ImportUpdate) ||
		(len(db.Spec.ForProvider.DataRoles) == 0 && len(tenancy.RecordedDataRoles(o.roles.meta)) == 0) {
		return nil
	}
	names, wanted := dataRoleNames(db, o.roles.meta)
	now := time.Now()
	verdicts := make([]tenancy.DataRoleVerdict, 0, len(names))
	for _, name := range names {
		w, isWanted := wanted[name]
		r, err := e.observeDataRole(ctx, db, o.names, name, w, isWanted, now)
		if err != nil {
			return failFrom(db, "observe data roles", err)
		}
		o.dataRoles = append(o.dataRoles, r)
		verdicts = append(verdicts, r.verdict)
	}
	o.verdict = tenancy.WithDataRoles(v, verdicts)
	return nil
}

// observeDataRole observes one data role: the catalog (one query) and,
// when its last proven login no longer stands, its record (one read), a
// login as it and the owner's check of its privileges (one session each).
func (e *external) observeDataRole(ctx context.Context, db *v1alpha1.Database, n names, name string, w v1alpha1.DataRole, isWanted bool, now time.Time) (dataRole, error) {
	o := tenancy.DataRoleObservation{Name: name, Role: tenancy.DataRoleName(n.role, name), Path: tenancy.DataRolePath(n.roles, name),
		Wanted: isWanted, Access: w.Access, Rotation: dataRoleRotation(db, w)}
	lim := tenancy.LimitsOf(e.cfgLimits, w.Limits).WithDefaultConnectionLimit(e.defaultConnLimit)
	cat, err := e.pool.Observe(ctx, n.database, o.Role)
	if err != nil {
		return dataRole{}, err
	}
	o.R = tenancy.RoleState{Exists: cat.RoleExists, OID: cat.RoleOID, AttributesOK: cat.RoleAttributesOK(), AdminMember: cat.AdminMember,
		AdminCanAdmin: cat.AdminCanAdmin, Elevated: cat.Superuser || cat.Replication || cat.BypassRLS, Limits: cat.RoleLimits()}
	o.LimitsDrifted = isWanted && cat.RoleExists && tenancy.DecideLimits(lim, o.R.Limits).Drifted()
	fingerprint := fmt.Sprintf("%s access=%s limits=%v rotation=%q", cat.LoginFingerprint(), w.Access, lim, [2]string{o.Rotation.ID, o.Rotation.DatabaseID})
	if last := e.lastDataLogin(db, name); isWanted && cat.RoleExists && last != nil && last.Record != nil &&
		last.Fingerprint == fmt.Sprintf("%s kv=%d", fingerprint, last.Record.Version) && now.Before(last.Due) {
		// Its last proven login and privilege check stand.
		o.KV, o.Login, o.Checked = *last.Record, tenancy.LoginOK, true
		if v := tenancy.DecideDataRole(o, e.id); v.Ready {
			metrics.LoginSkipped()
			return dataRole{obs: o, verdict: v, limits: lim}, nil
		}
	}
	if err := e.checkDataRole(ctx, n, &o, isWanted && cat.RoleExists, cat.RoleExists); err != nil {
		return dataRole{}, err
	}
	v := tenancy.DecideDataRole(o, e.id)
	e.rememberDataLogin(db, name, v.Ready, o.KV, fmt.Sprintf("%s kv=%d", fingerprint, o.KV.Version), now)
	return dataRole{obs: o, verdict: v, limits: lim}, nil
}

// checkDataRole reads the data role's record and, when it is this
// Database's, logs in as the role and has the owner check its privileges.
func (e *external) checkDataRole(ctx context.Context, n names, o *tenancy.DataRoleObservation, wantedAndExists, exists bool) error {
	rec, err := e.kv.Read(ctx, o.Path)
	if err != nil {
		return err
	}
	o.KV, o.Login, o.Checked, o.Missing = tenancy.KVState{}, tenancy.LoginNotTried, false, nil
	if rec != nil {
		o.KV = tenancy.KVState{Present: true, Owner: rec.Owner, Data: rec.Data, Version: rec.Version}
	}
	mine := tenancy.KVOurs(o.KV, e.id) && o.KV.Owner[tenancy.MetaDataRole] == o.Name
	if exists && mine && o.KV.Data["password"] != "" &&
		tenancy.EndpointChange(tenancy.RecordedEndpoint(o.KV), e.wantData(n)) == "" {
		o.Login = e.dataLogin(ctx, n.database, o.Role, o.KV.Data["password"])
		metrics.LoginMade()
	}
	if wantedAndExists && mine && (o.Login == tenancy.LoginOK || o.Login == tenancy.LoginAuthOK) {
		missing, err := e.pool.ObserveAccess(ctx, n.database, n.role, o.Role, postgres.Access(o.Access))
		if err != nil {
			return err
		}
		o.Checked, o.Missing = true, missing
	}
	return nil
}

// rememberDataLogin keeps a ready data role's proven check until it is due
// again, and forgets any other.
func (e *external) rememberDataLogin(db *v1alpha1.Database, name string, ready bool, kv tenancy.KVState, fingerprint string, now time.Time) {
	if e.logins == nil || e.opts.LoginCheckInterval <= 0 {
		return
	}
	key := memo.DataRoleKey(db.GetUID(), name)
	if !ready {
		e.logins.Forget(key)
		return
	}
	rec := kv.WithoutPassword()
	e.logins.Put(key, tenancy.ProvenLogin{Fingerprint: fingerprint, Record: &rec,
		Due: tenancy.NextLoginDue(now, e.opts.LoginCheckInterval, e.logins.Spread())}, now)
}

// dataRoleRotation is what the Database asks of the data role w's
// password: its own rotation and the Database's, which rotates every
// role. Sessions end when the request that is new asks it (either, when
// both are).
func dataRoleRotation(db *v1alpha1.Database, w v1alpha1.DataRole) tenancy.DataRoleRotation {
	var r tenancy.DataRoleRotation
	if c := w.CredentialRotation; c != nil {
		r.ID, r.TerminateSessions = c.ID, c.TerminateSessions
	}
	if c := db.Spec.CredentialRotation; c != nil {
		r.DatabaseID = c.ID
		r.TerminateSessions = r.TerminateSessions || c.TerminateSessions
	}
	return r
}

// lastDataLogin is the data role's last proven login, nil when none.
func (e *external) lastDataLogin(db *v1alpha1.Database, name string) *tenancy.ProvenLogin {
	if e.logins == nil || e.opts.LoginCheckInterval <= 0 {
		return nil
	}
	return e.logins.Get(memo.DataRoleKey(db.GetUID(), name))
}

// dataLogin logs in as a data role to its database. A refusal of the
// database after the password was accepted (no CONNECT yet: SQLSTATE
// 42501) proves the password.
func (e *external) dataLogin(ctx context.Context, database, role, password string) tenancy.Login {
	c, err := e.pool.ConnectAs(ctx, database, postgres.Credential{Username: role, Password: password})
	if err == nil {
		_ = c.Close(ctx)
		return tenancy.LoginOK
	}
	var pe *postgres.Error
	if errors.As(err, &pe) {
		switch {
		case pe.SQLState == "42501" || pe.SQLState == "3D000" || pe.SQLState == "55000":
			return tenancy.LoginAuthOK
		case postgres.LimitAfterAuthentication(err):
			return tenancy.LoginLimitFull
		case pe.Class == postgres.ClassAuthentication:
			metrics.LoginFailed("refused")
			return tenancy.LoginRefused
		}
	}
	metrics.LoginFailed("unavailable")
	return tenancy.LoginUnavailable
}

// reportDataRoles writes status.atProvider.dataRoles.
func (e *external) reportDataRoles(db *v1alpha1.Database, roles []dataRole) {
	var out []v1alpha1.DataRoleObservation
	for _, r := range roles {
		if !r.obs.Wanted {
			continue
		}
		s := v1alpha1.DataRoleObservation{Name: r.obs.Name, Role: r.obs.Role, Access: r.obs.Access, CredentialPath: r.obs.Path,
			Ready: r.verdict.Ready, Message: r.verdict.Message + r.verdict.Conflict}
		if rec := tenancy.DataRoleRotationOf(r.obs.KV.Owner); rec.HasCompleted && tenancy.KVOurs(r.obs.KV, e.id) {
			s.CredentialRotation = &v1alpha1.DataRoleRotationObservation{ID: rec.Completed[0], DatabaseID: rec.Completed[1]}
			if t, err := time.Parse(time.RFC3339, rec.CompletedAt); err == nil {
				s.CredentialRotation.CompletedAt = &metav1.Time{Time: t}
			}
		}
		if len(r.obs.Missing) > 0 {
			s.Missing = slices.Clone(r.obs.Missing[:min(10, len(r.obs.Missing))])
		}
		out = append(out, s)
	}
	db.Status.AtProvider.DataRoles = out
}
