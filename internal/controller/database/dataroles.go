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
	StepDataRoleMove       = "data-role-move"
	StepDataRoleMember     = "data-role-member"
	StepDataRoleRetire     = "data-role-retire"
)

// dataRole is one data role as Observe found it.
type dataRole struct {
	obs     tenancy.DataRoleObservation
	verdict tenancy.DataRoleVerdict
	limits  tenancy.EffectiveLimits
	// memberLimits are the limits the catalog shows of the login member
	// in use.
	memberLimits tenancy.RoleLimitsState
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

// observeDataRole observes one data role: the catalog of its role and of
// its two login members (one query each: the role, both members) and, when its last proven login
// no longer stands, its record (one read), a login as the member the
// record names and the owner's check of its privileges (one session each).
func (e *external) observeDataRole(ctx context.Context, db *v1alpha1.Database, n names, name string, w v1alpha1.DataRole, isWanted bool, now time.Time) (dataRole, error) {
	o := tenancy.DataRoleObservation{Name: name, Role: tenancy.DataRoleName(n.role, name), Path: tenancy.DataRolePath(n.roles, name),
		Wanted: isWanted, Access: w.Access, Rotation: dataRoleRotation(db, w), Now: now,
		Policy: tenancy.CredentialPolicyOf(e.cfgCredentials, db.Spec.ForProvider.CredentialPolicy, string(db.GetUID())+"/"+name)}
	lim := tenancy.LimitsOf(e.cfgLimits, w.Limits).WithDefaultConnectionLimit(e.defaultConnLimit)
	cat, err := e.pool.Observe(ctx, n.database, o.Role)
	if err != nil {
		return dataRole{}, err
	}
	o.R = tenancy.RoleState{Exists: cat.RoleExists, OID: cat.RoleOID, AttributesOK: cat.RoleAttributesOK(), AdminMember: cat.AdminMember,
		AdminCanAdmin: cat.AdminCanAdmin, Elevated: cat.Superuser || cat.Replication || cat.BypassRLS, Limits: cat.RoleLimits(),
		CanLogin: cat.Login, GroupOK: cat.GroupAttributesOK()}
	members, mcats, err := e.observeMembers(ctx, n, o.Role, cat)
	if err != nil {
		return dataRole{}, err
	}
	o.Members = members
	r := dataRole{limits: lim}
	fingerprint := fmt.Sprintf("%s members=%s access=%s limits=%v rotation=%q", cat.LoginFingerprint(), mcats, w.Access, lim, [2]string{o.Rotation.ID, o.Rotation.DatabaseID})
	if last := e.lastDataLogin(db, name); isWanted && cat.RoleExists && last != nil && last.Record != nil &&
		last.Fingerprint == fmt.Sprintf("%s kv=%d", fingerprint, last.Record.Version) && now.Before(last.Due) {
		// Its last proven login and privilege check stand.
		o.KV, o.Login, o.Checked = *last.Record, tenancy.LoginOK, true
		r.settle(&o, cat, mcats)
		if v := tenancy.DecideDataRole(o, e.id); v.Ready {
			metrics.LoginSkipped()
			r.obs, r.verdict = o, v
			return r, nil
		}
	}
	if err := e.checkDataRole(ctx, n, &o, isWanted && cat.RoleExists, cat.RoleExists); err != nil {
		return dataRole{}, err
	}
	r.settle(&o, cat, mcats)
	v := tenancy.DecideDataRole(o, e.id)
	e.rememberDataLogin(db, name, v.Ready, o.KV, fmt.Sprintf("%s kv=%d", fingerprint, o.KV.Version), now)
	r.obs, r.verdict = o, v
	return r, nil
}

// memberCatalogs are the catalog readings of a data role's members, kept
// for the limits of the one in use.
type memberCatalogs [2]postgres.Catalog

// observeMembers reads the catalog of the data role's two login members
// (one query):
// whether each exists, can log in, has a tenant role's attributes, and
// inherits the role's privileges (a member of it, inheriting).
func (e *external) observeMembers(ctx context.Context, n names, role string, group postgres.Catalog) ([2]tenancy.MemberState, memberCatalogs, error) {
	var out [2]tenancy.MemberState
	var cats memberCatalogs
	cats, err := e.pool.ObserveMembers(ctx, n.database, tenancy.MemberName(role, 1), tenancy.MemberName(role, 2))
	if err != nil {
		return out, cats, err
	}
	for i, c := range cats {
		if !c.RoleExists {
			continue
		}
		inherits := false
		for _, m := range group.OtherMembers {
			if m.Role == tenancy.MemberName(role, i+1) {
				inherits = c.Inherit
				if m.Inherit != nil {
					inherits = *m.Inherit
				}
			}
		}
		out[i] = tenancy.MemberState{Exists: true, OID: c.RoleOID, CanLogin: c.Login, AttributesOK: c.GroupAttributesOK(),
			Inherits: inherits, AdminMember: c.AdminMember}
	}
	return out, cats, nil
}

// String is the members' part of a data role's login fingerprint.
func (m memberCatalogs) String() string {
	return m[0].LoginFingerprint() + "|" + m[1].LoginFingerprint()
}

// settle completes the observation with what depends on the record: the
// limits of the login in use (the role itself until it moves to its
// members, then the member the record names).
func (r *dataRole) settle(o *tenancy.DataRoleObservation, group postgres.Catalog, members memberCatalogs) {
	state, exists, i := group.RoleLimits(), o.R.Exists, -1
	for k := range members {
		if o.KV.Data["username"] == tenancy.MemberName(o.Role, k+1) {
			i = k
			state, exists = members[k].RoleLimits(), o.Members[k].Exists
		}
	}
	r.memberLimits = state
	drifted := o.Wanted && exists && tenancy.DecideLimits(r.limits, state).Drifted()
	o.LimitsDrifted = i < 0 && drifted
	if i >= 0 {
		o.Members[i].LimitsDrifted = drifted
	}
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
		o.KV = tenancy.KVState{Present: true, Owner: rec.Owner, Data: rec.Data, Version: rec.Version, Created: rec.Created}
	}
	mine := tenancy.KVOurs(o.KV, e.id) && o.KV.Owner[tenancy.MetaDataRole] == o.Name
	if exists && mine && o.KV.Data["password"] != "" &&
		tenancy.EndpointChange(tenancy.RecordedEndpoint(o.KV), e.wantData(n)) == "" {
		o.Login = e.dataLogin(ctx, n.database, dataLoginName(*o), o.KV.Data["password"])
		metrics.LoginMade()
	}
	if m1 := o.Members[0]; exists && mine && o.KV.Data["password"] != "" && dataLoginName(*o) == o.Role &&
		m1.Exists && o.KV.Owner[tenancy.MetaMemberOID(1)] == "" {
		// A move to the members interrupted before the member's OID was
		// recorded: its password is the record's.
		o.Members[0].Login = e.dataLogin(ctx, n.database, tenancy.MemberName(o.Role, 1), o.KV.Data["password"])
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

// dataLoginName is the login the data role's record names: one of its
// members, or the role itself before it moved to them. A record naming
// any other role is tried as the role itself (and refused).
func dataLoginName(o tenancy.DataRoleObservation) string {
	switch u := o.KV.Data["username"]; u {
	case tenancy.MemberName(o.Role, 1), tenancy.MemberName(o.Role, 2):
		return u
	}
	return o.Role
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
		r.ID, r.TerminateSessions, r.RoleTerminates = c.ID, c.TerminateSessions, c.TerminateSessions
	}
	if c := db.Spec.CredentialRotation; c != nil {
		r.DatabaseID = c.ID
		r.TerminateSessions = r.TerminateSessions || c.TerminateSessions
		r.DatabaseTerminates = c.TerminateSessions
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
		if tenancy.KVOurs(r.obs.KV, e.id) {
			reportLogins(&s, tenancy.LoginsOf(r.obs))
		}
		out = append(out, s)
		if e.confirm != nil {
			e.confirm.At(db.GetUID(), r.verdict.WakeAt())
		}
	}
	db.Status.AtProvider.DataRoles = out
}

// reportLogins shows a data role's logins: the one in use, the previous
// one while in its grace, the password's time and its next rotation.
// Each is a point in time, not an age, so that status changes only when
// they do.
func reportLogins(s *v1alpha1.DataRoleObservation, l tenancy.DataRoleLogins) {
	s.LoginRole, s.PreviousLogin = l.Login, l.Previous
	s.PasswordSetAt, s.NextRotationAt, s.PreviousLoginEndsAt = metaTime(l.PasswordSetAt), metaTime(l.NextRotation), metaTime(l.PreviousUntil)
}

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}
