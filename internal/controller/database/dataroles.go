package database

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
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

// observeDataRoles observes every data role of a Database whose owner is
// Ready: for each, the catalog (one query) and, when its last proven login
// no longer stands, its record (one read), a login as it and the owner's
// check of its privileges (one session each).
func (e *external) observeDataRoles(ctx context.Context, db *v1alpha1.Database) ([]dataRole, error) {
	n := e.names
	names, wanted := dataRoleNames(db, e.roleList)
	out := make([]dataRole, 0, len(names))
	now := time.Now()
	for _, name := range names {
		w, isWanted := wanted[name]
		o := tenancy.DataRoleObservation{Name: name, Role: tenancy.DataRoleName(n.role, name), Path: tenancy.DataRolePath(n.roles, name),
			Wanted: isWanted, Access: w.Access, Rotation: dataRoleRotation(db, w)}
		lim := tenancy.LimitsOf(e.cfgLimits, w.Limits).WithDefaultConnectionLimit(e.defaultConnLimit)
		cat, err := e.pool.Observe(ctx, n.database, o.Role)
		if err != nil {
			return nil, err
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
				out = append(out, dataRole{obs: o, verdict: v, limits: lim})
				continue
			}
		}
		rec, err := e.kv.Read(ctx, o.Path)
		if err != nil {
			return nil, err
		}
		o.KV, o.Login, o.Checked, o.Missing = tenancy.KVState{}, tenancy.LoginNotTried, false, nil
		if rec != nil {
			o.KV = tenancy.KVState{Present: true, Owner: rec.Owner, Data: rec.Data, Version: rec.Version}
		}
		mine := tenancy.KVOurs(o.KV, e.id) && o.KV.Owner[tenancy.MetaDataRole] == name
		if cat.RoleExists && mine && o.KV.Data["password"] != "" &&
			tenancy.EndpointChange(tenancy.RecordedEndpoint(o.KV), e.wantData(n)) == "" {
			o.Login = e.dataLogin(ctx, n.database, o.Role, o.KV.Data["password"])
			metrics.LoginMade()
		}
		if isWanted && cat.RoleExists && mine && (o.Login == tenancy.LoginOK || o.Login == tenancy.LoginAuthOK) {
			missing, err := e.pool.ObserveAccess(ctx, n.database, n.role, o.Role, postgres.Access(w.Access))
			if err != nil {
				return nil, err
			}
			o.Checked, o.Missing = true, missing
		}
		v := tenancy.DecideDataRole(o, e.id)
		if e.logins != nil && e.opts.LoginCheckInterval > 0 {
			if v.Ready {
				rec := o.KV.WithoutPassword()
				e.logins.Put(memo.DataRoleKey(db.GetUID(), name), tenancy.ProvenLogin{
					Fingerprint: fmt.Sprintf("%s kv=%d", fingerprint, o.KV.Version), Record: &rec,
					Due: tenancy.NextLoginDue(now, e.opts.LoginCheckInterval, e.logins.Spread()),
				}, now)
			} else {
				e.logins.Forget(memo.DataRoleKey(db.GetUID(), name))
			}
		}
		out = append(out, dataRole{obs: o, verdict: v, limits: lim})
	}
	return out, nil
}

// readRoleList reads what lists the data roles: the Database's own
// record's metadata, already read; for an import with Update, the entry of
// its own at names.roles (one read per Observe). A read-only import has
// none: it never gets data roles.
func (e *external) readRoleList(ctx context.Context, o tenancy.Observation) error {
	e.roleList, e.roleListOurs = nil, false
	n := e.names
	if n.roles == n.path {
		if tenancy.KVOurs(o.KV, e.id) {
			e.roleList, e.roleListOurs = o.KV.Owner, true
		}
		return nil
	}
	if !o.ImportUpdate {
		return nil
	}
	rec, err := e.kv.Read(ctx, n.roles)
	if err != nil || rec == nil {
		return err
	}
	e.roleList = rec.Owner
	e.roleListOurs = tenancy.KVOurs(tenancy.KVState{Present: true, Owner: rec.Owner}, e.id)
	return nil
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
func (e *external) reportDataRoles(db *v1alpha1.Database) {
	var out []v1alpha1.DataRoleObservation
	for _, r := range e.dataRoles {
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

// applyDataRoles takes each data role's actions, in order. The record's
// list of data roles names a role before its record is written, and
// forgets it after its record is deleted.
func (e *external) applyDataRoles(ctx context.Context, db *v1alpha1.Database) error {
	n := e.names
	listed := tenancy.RecordedDataRoles(e.roleList)
	list := func(names []string) error {
		value := tenancy.DataRolesValue(names)
		if value == tenancy.DataRolesValue(listed) {
			return nil
		}
		if err := e.step(StepDataRolesList); err != nil {
			return failFrom(db, StepDataRolesList, err)
		}
		m := map[string]string{tenancy.MetaDataRoles: value}
		if n.roles != n.path && !e.roleListOurs {
			// An import's list, in an entry of its own: made with this
			// Database's ownership, only where nothing is.
			if e.roleList != nil {
				return fail(db, tenancy.ReasonConflict, fmt.Sprintf("the data roles of this import are listed at %s, which exists and is not this Database's; nothing was written", n.roles))
			}
			maps.Copy(m, tenancy.OwnerMetadata(e.id))
		}
		if err := e.kv.SetOwner(ctx, n.roles, m); err != nil {
			return failFrom(db, StepDataRolesList, err)
		}
		e.roleListOurs = true
		listed = tenancy.RecordedDataRoles(map[string]string{tenancy.MetaDataRoles: value})
		return nil
	}
	var done []string
	created := false
	for _, r := range e.dataRoles {
		o, v := r.obs, r.verdict
		if v.Conflict != "" {
			continue
		}
		if e.logins != nil && len(v.Actions) > 0 {
			e.logins.Forget(memo.DataRoleKey(db.GetUID(), o.Name))
		}
		password := o.KV.Data["password"]
		for _, a := range v.Actions {
			var err error
			step := ""
			switch a {
			case tenancy.DataRoleWriteRecord:
				if err := list(append(slices.Clone(listed), o.Name)); err != nil {
					return err
				}
				step = StepDataRoleRecord
				if err = e.step(step); err == nil {
					password, err = e.writeDataRoleRecord(ctx, o)
				}
			case tenancy.DataRoleCreate:
				step = StepDataRoleCreate
				if err = e.step(step); err == nil {
					var verifier string
					if verifier, err = scram.Verifier(password); err == nil {
						err = e.pool.CreateRoleWithLimits(ctx, o.Role, verifier, r.limits)
					}
				}
			case tenancy.DataRoleRecordOID:
				step = StepDataRoleOID
				if err = e.step(step); err == nil {
					err = e.recordDataRoleOID(ctx, o)
				}
			case tenancy.DataRoleRepairAttributes:
				step = StepDataRoleRepair
				if err = e.step(step); err == nil {
					if !o.R.AdminMember {
						err = e.pool.GrantRoleToAdmin(ctx, o.Role)
					}
					if err == nil {
						err = e.pool.RepairRole(ctx, o.Role)
					}
					if err == nil {
						err = e.pool.SetRoleLimits(ctx, o.Role, n.database, tenancy.DecideLimits(r.limits, o.R.Limits))
					}
				}
			case tenancy.DataRoleRepairPassword:
				step = StepDataRoleRepair
				if err = e.step(step); err == nil {
					var verifier string
					if verifier, err = scram.Verifier(password); err == nil {
						err = e.pool.SetRolePassword(ctx, o.Role, verifier)
					}
				}
			case tenancy.DataRoleRotate, tenancy.DataRoleRotateFinish:
				step = StepDataRoleRotate
				if err = e.step(step); err == nil {
					err = e.rotateDataRole(ctx, db, o, v.Rotation, a == tenancy.DataRoleRotate)
				}
			case tenancy.DataRoleGrant:
				step = StepDataRoleGrant
				if err = e.step(step); err == nil {
					err = e.pool.GrantAccess(ctx, n.database, n.role, o.Role, postgres.Access(o.Access))
				}
			case tenancy.DataRoleDrop:
				step = StepDataRoleDrop
				if err = e.step(step); err == nil {
					err = e.dropDataRole(ctx, n.database, n.role, o.Role, true)
				}
			case tenancy.DataRoleDeleteRecord:
				step = StepDataRoleDelete
				if err = e.step(step); err == nil {
					if err = e.kv.Delete(ctx, o.Path); err == nil {
						err = list(slices.DeleteFunc(slices.Clone(listed), func(s string) bool { return s == o.Name }))
					}
				}
			}
			if err != nil {
				return failFrom(db, fmt.Sprintf("%s (data role %q)", step, o.Name), err)
			}
		}
		if len(v.Actions) > 0 {
			done = append(done, fmt.Sprintf("%s: %s", o.Name, joinActions(v.Actions)))
			created = created || slices.Contains(v.Actions, tenancy.DataRoleCreate)
		}
	}
	// A name listed whose record is gone (a removal interrupted after
	// the record was deleted, or before it was written) is forgotten.
	keep := slices.DeleteFunc(slices.Clone(listed), func(name string) bool {
		for _, r := range e.dataRoles {
			if r.obs.Name == name {
				return !r.obs.Wanted && !r.obs.KV.Present
			}
		}
		return false
	})
	if err := list(keep); err != nil {
		return err
	}
	if len(done) > 0 {
		e.record.Event(db, event.Normal("DataRolesUpdated", "data roles: "+strings.Join(done, "; ")))
		if e.confirm != nil {
			// Observed again soon, to show them Ready.
			e.confirm.Repaired(db.GetUID())
			if created {
				e.confirm.Created(db.GetUID())
			}
		}
	}
	return nil
}

// writeDataRoleRecord writes a data role's record as the Database's own is
// written: ownership metadata first (on an absent path), then the first
// version with check-and-set 0, then read back. It returns the password.
func (e *external) writeDataRoleRecord(ctx context.Context, o tenancy.DataRoleObservation) (string, error) {
	m := tenancy.DataRoleMetadata(e.id, o.Name, o.Access)
	maps.Copy(m, tenancy.DataRoleRotationCreated(o.Rotation, time.Now().UTC().Format(time.RFC3339)))
	if err := e.kv.SetOwner(ctx, o.Path, m); err != nil {
		return "", err
	}
	pw, err := NewPassword()
	if err != nil {
		return "", err
	}
	data := e.wantData(e.names)
	data["username"] = o.Role
	data["password"] = pw
	if _, err := e.kv.Write(ctx, o.Path, data, 0); err != nil {
		return "", err
	}
	rec, err := e.kv.Read(ctx, o.Path)
	if err != nil {
		return "", err
	}
	if rec == nil || rec.Data["password"] != pw || !tenancy.KVOurs(tenancy.KVState{Present: true, Owner: rec.Owner}, e.id) {
		return "", errors.New("the credential read back from OpenBao is not the one written; retrying from the ownership check")
	}
	return pw, nil
}

// recordDataRoleOID writes the data role's OID into its record's
// metadata.
func (e *external) recordDataRoleOID(ctx context.Context, o tenancy.DataRoleObservation) error {
	cat, err := e.pool.Observe(ctx, e.names.database, o.Role)
	if err != nil {
		return err
	}
	if !cat.RoleExists {
		return fmt.Errorf("the role %q does not exist after creating it", o.Role)
	}
	m := tenancy.DataRoleMetadata(e.id, o.Name, o.Access)
	m[tenancy.MetaRoleOID] = fmt.Sprint(cat.RoleOID)
	return e.kv.SetOwner(ctx, o.Path, m)
}

// dropDataRole ends a data role's sessions, takes what the owner granted it
// (when its database still exists) and drops it.
func (e *external) dropDataRole(ctx context.Context, database, owner, role string, databaseExists bool) error {
	if err := e.pool.BlockLogins(ctx, role); err != nil {
		return err
	}
	if _, err := e.pool.TerminateRoleSessions(ctx, role); err != nil {
		return err
	}
	if databaseExists {
		if err := e.pool.RevokeAccess(ctx, database, owner, role); err != nil {
			return err
		}
	}
	return e.pool.DropRole(ctx, role)
}

func joinActions(a []tenancy.DataRoleAction) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// dropDataRoles drops, for a Database being deleted with reclaim policy
// Delete, every data role its record lists and provably created, and
// deletes their records. databaseDropped: the database (and every grant
// in it) is gone.
func (e *external) dropDataRoles(ctx context.Context, db *v1alpha1.Database, databaseDropped bool) error {
	n := e.names
	for _, name := range tenancy.RecordedDataRoles(e.roleList) {
		if !tenancy.ValidIdentifier(name) {
			continue
		}
		role, path := tenancy.DataRoleName(n.role, name), tenancy.DataRolePath(n.roles, name)
		rec, err := e.kv.Read(ctx, path)
		if err != nil {
			return failFrom(db, StepDataRoleDrop, err)
		}
		if rec == nil || !tenancy.KVOurs(tenancy.KVState{Present: true, Owner: rec.Owner}, e.id) || rec.Owner[tenancy.MetaDataRole] != name {
			continue
		}
		cat, err := e.pool.Observe(ctx, n.database, role)
		if err != nil {
			return failFrom(db, StepDataRoleDrop, err)
		}
		if cat.RoleExists && rec.Owner[tenancy.MetaRoleOID] == fmt.Sprint(cat.RoleOID) {
			if err := e.do(db, StepDataRoleDrop, func() error {
				return e.dropDataRole(ctx, n.database, n.role, role, !databaseDropped && cat.DatabaseExists)
			}); err != nil {
				return err
			}
		}
		if err := e.do(db, StepDataRoleDelete, func() error { return e.kv.Delete(ctx, path) }); err != nil {
			return err
		}
	}
	return nil
}

// rotateDataRole rotates a data role's password, each step durable before
// the next, as the owner's rotation does: (start) the intent is recorded,
// then a new random password written as the next version with
// check-and-set; then the role gets its verifier, its sessions ending in
// the same transaction when asked (a session of the role cannot set its
// own password back in between), a login proves it, and the completion is
// recorded. Interrupted after the write, the next Observe finishes with
// that version's password, never a second one.
func (e *external) rotateDataRole(ctx context.Context, db *v1alpha1.Database, o tenancy.DataRoleObservation, ids [2]string, start bool) error {
	password := o.KV.Data["password"]
	version := o.KV.Version
	if start {
		version++
		r := tenancy.DataRoleRotation{ID: ids[0], DatabaseID: ids[1]}
		if err := e.kv.SetOwner(ctx, o.Path, tenancy.DataRoleRotationIntent(r, version)); err != nil {
			return err
		}
		pw, err := NewPassword()
		if err != nil {
			return err
		}
		data := maps.Clone(o.KV.Data)
		data["password"] = pw
		ver, err := e.kv.Write(ctx, o.Path, data, o.KV.Version)
		if err != nil {
			return err
		}
		if ver != version {
			return fmt.Errorf("the rotated credential was written as version %d of %s, not %d; the next observation decides", ver, o.Path, version)
		}
		password = pw
	}
	if password == "" {
		return fmt.Errorf("version %d of %s has no password; the next observation decides", version, o.Path)
	}
	if err := e.step(StepDataRoleRotateRole); err != nil {
		return err
	}
	verifier, err := scram.Verifier(password)
	if err != nil {
		return err
	}
	ended := 0
	if o.Rotation.TerminateSessions {
		if ended, err = e.pool.SetRolePasswordEndingSessions(ctx, o.Role, verifier); err != nil {
			return err
		}
	} else if err := e.pool.SetRolePassword(ctx, o.Role, verifier); err != nil {
		return err
	}
	if l := e.dataLogin(ctx, e.names.database, o.Role, password); l != tenancy.LoginOK && l != tenancy.LoginAuthOK && l != tenancy.LoginLimitFull {
		return fmt.Errorf("the rotated password of the role %q did not log in; retrying", o.Role)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := e.kv.SetOwner(ctx, o.Path, tenancy.DataRoleRotationCompletion(ids, now.Format(time.RFC3339))); err != nil {
		return err
	}
	e.record.Event(db, event.Normal("DataRoleCredentialRotated", fmt.Sprintf("data role %q: the role %q logs in with version %d of %s; %d of its sessions ended", o.Name, o.Role, version, o.Path, ended)))
	return nil
}

// recheckDataRoles checks again, right after something that changes
// grants in the database (the access cleanup), the privileges of every
// data role that was ready, and reports what the check shows: a data role
// is never shown ready on the strength of a check made before the change.
// A role the check finds lacking is repaired by the next reconcile.
func (e *external) recheckDataRoles(ctx context.Context, db *v1alpha1.Database) {
	n := e.names
	for i, r := range e.dataRoles {
		if !r.obs.Wanted || !r.verdict.Ready {
			continue
		}
		o := r.obs
		missing, err := e.pool.ObserveAccess(ctx, n.database, n.role, o.Role, postgres.Access(o.Access))
		o.Checked, o.Missing = err == nil, missing
		if err != nil {
			e.log.Debug("cannot check a data role's privileges after the access cleanup", "role", o.Name, "error", err)
		}
		e.dataRoles[i].obs, e.dataRoles[i].verdict = o, tenancy.DecideDataRole(o, e.id)
	}
	e.reportDataRoles(db)
}
