package database

import (
	"context"

	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// roleLister keeps the list of data roles in the listing entry's metadata
// while the actions change it: a role is listed before its record is
// written, and forgotten after its record is deleted.
type roleLister struct {
	e      *external
	db     *v1alpha1.Database
	n      names
	roles  *roleList
	listed []string
}

// set writes the list as names, when it differs from what is listed.
func (l *roleLister) set(ctx context.Context, names []string) error {
	value := tenancy.DataRolesValue(names)
	if value == tenancy.DataRolesValue(l.listed) {
		return nil
	}
	if err := l.e.step(StepDataRolesList); err != nil {
		return failFrom(l.db, StepDataRolesList, err)
	}
	m := map[string]string{tenancy.MetaDataRoles: value}
	if l.n.roles != l.n.path && !l.roles.ours {
		// An import's list, in an entry of its own: made with this
		// Database's ownership, only where nothing is.
		if l.roles.meta != nil {
			return fail(l.db, tenancy.ReasonConflict, fmt.Sprintf("the data roles of this import are listed at %s, which exists and is not this Database's; nothing was written", l.n.roles))
		}
		maps.Copy(m, tenancy.OwnerMetadata(l.e.id))
	}
	if err := l.e.kv.SetOwner(ctx, l.n.roles, m); err != nil {
		return failFrom(l.db, StepDataRolesList, err)
	}
	l.roles.ours = true
	l.listed = tenancy.RecordedDataRoles(map[string]string{tenancy.MetaDataRoles: value})
	return nil
}

func (l *roleLister) add(ctx context.Context, name string) error {
	return l.set(ctx, append(slices.Clone(l.listed), name))
}

func (l *roleLister) remove(ctx context.Context, name string) error {
	return l.set(ctx, slices.DeleteFunc(slices.Clone(l.listed), func(s string) bool { return s == name }))
}

// dataRoleTurn is one data role's actions being taken: the password is the
// record's as the actions so far left it.
type dataRoleTurn struct {
	e        *external
	db       *v1alpha1.Database
	n        names
	role     dataRole
	password string
	// username and version are the record's as the actions so far left
	// it; created: the turn created the role.
	username string
	version  int
	created  bool
	list     *roleLister
	action   tenancy.DataRoleAction
}

// dataRoleStep is how one data role action is taken: before runs ahead of
// the step's fault hook, do after it.
type dataRoleStep struct {
	step   string
	before func(ctx context.Context, t *dataRoleTurn) error
	do     func(ctx context.Context, t *dataRoleTurn) error
}

// dataRoleSteps is the table of the decision core's data role actions.
var dataRoleSteps = map[tenancy.DataRoleAction]dataRoleStep{
	tenancy.DataRoleWriteRecord: {step: StepDataRoleRecord,
		before: func(ctx context.Context, t *dataRoleTurn) error { return t.list.add(ctx, t.role.obs.Name) },
		do: func(ctx context.Context, t *dataRoleTurn) (err error) {
			t.password, err = t.e.writeDataRoleRecord(ctx, t.n, t.role.obs)
			t.username, t.version = t.role.obs.Role, 1
			return err
		}},
	tenancy.DataRoleCreate: {step: StepDataRoleCreate, do: func(ctx context.Context, t *dataRoleTurn) error {
		verifier, err := scram.Verifier(t.password)
		if err != nil {
			return err
		}
		if err := t.e.pool.CreateRoleWithLimits(ctx, t.role.obs.Role, verifier, t.role.limits); err != nil {
			return err
		}
		t.created = true
		if t.username != t.role.obs.Role {
			// Created again under members: the role itself does not log in.
			_, err = t.e.pool.RetireLogin(ctx, t.role.obs.Role, false)
		}
		return err
	}},
	tenancy.DataRoleRecordOID: {step: StepDataRoleOID, do: func(ctx context.Context, t *dataRoleTurn) error {
		return t.e.recordDataRoleOID(ctx, t.n, t.role.obs)
	}},
	tenancy.DataRoleRepairAttributes: {step: StepDataRoleRepair, do: func(ctx context.Context, t *dataRoleTurn) error {
		o := t.role.obs
		if !o.R.AdminMember {
			if err := t.e.pool.GrantRoleToAdmin(ctx, o.Role); err != nil {
				return err
			}
		}
		if t.username != o.Role {
			return t.e.pool.RepairGroup(ctx, o.Role)
		}
		if err := t.e.pool.RepairRole(ctx, o.Role); err != nil {
			return err
		}
		return t.e.pool.SetRoleLimits(ctx, o.Role, t.n.database, tenancy.DecideLimits(t.role.limits, o.R.Limits))
	}},
	tenancy.DataRoleRepairPassword: {step: StepDataRoleRepair, do: func(ctx context.Context, t *dataRoleTurn) error {
		verifier, err := scram.Verifier(t.password)
		if err != nil {
			return err
		}
		if t.username != t.role.obs.Role {
			return t.e.pool.SetMemberPassword(ctx, t.role.obs.Role, t.username, verifier)
		}
		return t.e.pool.SetRolePassword(ctx, t.role.obs.Role, verifier)
	}},
	tenancy.DataRoleMoveToMembers:   {step: StepDataRoleMove, do: moveToMembers},
	tenancy.DataRoleCreateMember:    {step: StepDataRoleMember, do: createMember},
	tenancy.DataRoleRecordMemberOID: {step: StepDataRoleMember, do: recordMemberOID},
	tenancy.DataRoleRepairMember:    {step: StepDataRoleMember, do: repairMember},
	tenancy.DataRoleRetirePrevious:  {step: StepDataRoleRetire, do: retirePrevious},
	tenancy.DataRoleStartGrace:      {step: StepDataRoleRetire, do: startGrace},
	tenancy.DataRoleRotate:          {step: StepDataRoleRotate, do: rotateTurn},
	tenancy.DataRoleRotateFinish:    {step: StepDataRoleRotate, do: rotateTurn},
	tenancy.DataRoleGrant: {step: StepDataRoleGrant, do: func(ctx context.Context, t *dataRoleTurn) error {
		return t.e.pool.GrantAccess(ctx, t.n.database, t.n.role, t.role.obs.Role, postgres.Access(t.role.obs.Access))
	}},
	tenancy.DataRoleDrop: {step: StepDataRoleDrop, do: func(ctx context.Context, t *dataRoleTurn) error {
		return t.e.dropDataRole(ctx, t.n.database, t.n.role, t.role.obs.Role, t.role.obs.KV.Owner, true)
	}},
	tenancy.DataRoleDeleteRecord: {step: StepDataRoleDelete, do: func(ctx context.Context, t *dataRoleTurn) error {
		// Its members go before the record that proves them.
		if err := t.e.dropMembers(ctx, t.n.database, t.role.obs.Role, t.role.obs.KV.Owner); err != nil {
			return err
		}
		if err := t.e.kv.Delete(ctx, t.role.obs.Path); err != nil {
			return err
		}
		return t.list.remove(ctx, t.role.obs.Name)
	}},
}

func rotateTurn(ctx context.Context, t *dataRoleTurn) error {
	return t.e.rotateDataRole(ctx, t, t.action == tenancy.DataRoleRotate)
}

// applyDataRoles takes each data role's actions, in order, from the table.
// A name listed whose record is gone (a removal interrupted after the
// record was deleted, or before it was written) is forgotten at the end.
func (e *external) applyDataRoles(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	list := &roleLister{e: e, db: db, n: o.names, roles: &o.roles, listed: tenancy.RecordedDataRoles(o.roles.meta)}
	var done []string
	created := false
	for _, r := range o.dataRoles {
		v := r.verdict
		if v.Conflict != "" || len(v.Actions) == 0 {
			continue
		}
		if e.logins != nil {
			e.logins.Forget(memo.DataRoleKey(db.GetUID(), r.obs.Name))
		}
		t := &dataRoleTurn{e: e, db: db, n: o.names, role: r, password: r.obs.KV.Data["password"], list: list,
			username: r.obs.KV.Data["username"], version: r.obs.KV.Version}
		for _, a := range v.Actions {
			if err := t.take(ctx, a); err != nil {
				return err
			}
		}
		done = append(done, fmt.Sprintf("%s: %s", r.obs.Name, joinActions(v.Actions)))
		created = created || slices.Contains(v.Actions, tenancy.DataRoleCreate)
	}
	keep := slices.DeleteFunc(slices.Clone(list.listed), func(name string) bool {
		for _, r := range o.dataRoles {
			if r.obs.Name == name {
				return !r.obs.Wanted && !r.obs.KV.Present
			}
		}
		return false
	})
	if err := list.set(ctx, keep); err != nil {
		return err
	}
	e.reportDataRoleActions(db, done, created)
	return nil
}

// take takes one action: an error names the step and the data role.
func (t *dataRoleTurn) take(ctx context.Context, a tenancy.DataRoleAction) error {
	s, ok := dataRoleSteps[a]
	if !ok {
		return nil
	}
	t.action = a
	if s.before != nil {
		if err := s.before(ctx, t); err != nil {
			return err
		}
	}
	err := t.e.step(s.step)
	if err == nil {
		err = s.do(ctx, t)
	}
	if err != nil {
		return failFrom(t.db, fmt.Sprintf("%s (data role %q)", s.step, t.role.obs.Name), err)
	}
	return nil
}

// reportDataRoleActions records what the actions did, and has the
// Database observed again soon to show them Ready.
func (e *external) reportDataRoleActions(db *v1alpha1.Database, done []string, created bool) {
	if len(done) == 0 {
		return
	}
	e.record.Event(db, event.Normal("DataRolesUpdated", "data roles: "+strings.Join(done, "; ")))
	if e.confirm != nil {
		e.confirm.Repaired(db.GetUID())
		if created {
			e.confirm.Created(db.GetUID())
		}
	}
}

// writeDataRoleRecord writes a data role's record as the Database's own is
// written: ownership metadata first (on an absent path), then the first
// version with check-and-set 0, then read back. It returns the password.
func (e *external) writeDataRoleRecord(ctx context.Context, n names, o tenancy.DataRoleObservation) (string, error) {
	m := tenancy.DataRoleMetadata(e.id, o.Name, o.Access)
	maps.Copy(m, tenancy.DataRoleRotationCreated(o.Rotation, time.Now().UTC().Truncate(time.Second)))
	if err := e.kv.SetOwner(ctx, o.Path, m); err != nil {
		return "", err
	}
	pw, err := NewPassword()
	if err != nil {
		return "", err
	}
	data := e.wantData(n)
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
func (e *external) recordDataRoleOID(ctx context.Context, n names, o tenancy.DataRoleObservation) error {
	cat, err := e.pool.Observe(ctx, n.database, o.Role)
	if err != nil {
		return err
	}
	if !cat.RoleExists {
		return errors.Errorf("the role %q does not exist after creating it", o.Role)
	}
	m := tenancy.DataRoleMetadata(e.id, o.Name, o.Access)
	m[tenancy.MetaRoleOID] = fmt.Sprint(cat.RoleOID)
	return e.kv.SetOwner(ctx, o.Path, m)
}

// dropDataRole drops a data role's login members its record's metadata
// (meta) names by OID, after ending their sessions; then ends the role's
// own sessions, takes what the owner granted it (when its database still
// exists) and drops it.
func (e *external) dropDataRole(ctx context.Context, database, owner, role string, meta map[string]string, databaseExists bool) error {
	if err := e.dropMembers(ctx, database, role, meta); err != nil {
		return err
	}
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

// dropMembers drops, after ending their sessions, the login members of
// the data role role whose OIDs its record's metadata (meta) holds.
func (e *external) dropMembers(ctx context.Context, database, role string, meta map[string]string) error {
	for i := 1; i <= 2; i++ {
		member := tenancy.MemberName(role, i)
		cat, err := e.pool.Observe(ctx, database, member)
		if err != nil {
			return err
		}
		if !cat.RoleExists || meta[tenancy.MetaMemberOID(i)] != fmt.Sprint(cat.RoleOID) {
			continue
		}
		if err := e.pool.BlockLogins(ctx, member); err != nil {
			return err
		}
		if _, err := e.pool.TerminateRoleSessions(ctx, member); err != nil {
			return err
		}
		if err := e.pool.DropRole(ctx, member); err != nil {
			return err
		}
	}
	return nil
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
func (e *external) dropDataRoles(ctx context.Context, db *v1alpha1.Database, o *observation, databaseDropped bool) error {
	n := o.names
	for _, name := range tenancy.RecordedDataRoles(o.roles.meta) {
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
		if err := e.do(db, StepDataRoleDrop, func() error {
			if cat.RoleExists && rec.Owner[tenancy.MetaRoleOID] == fmt.Sprint(cat.RoleOID) {
				return e.dropDataRole(ctx, n.database, n.role, role, rec.Owner, !databaseDropped && cat.DatabaseExists)
			}
			return e.dropMembers(ctx, n.database, role, rec.Owner)
		}); err != nil {
			return err
		}
		if err := e.do(db, StepDataRoleDelete, func() error { return e.kv.Delete(ctx, path) }); err != nil {
			return err
		}
	}
	return nil
}

// recheckDataRoles checks again, right after something that changes
// grants in the database (the access cleanup), the privileges of every
// data role that was ready, and reports what the check shows: a data role
// is never shown ready on the strength of a check made before the change.
// A role the check finds lacking is repaired by the next reconcile.
func (e *external) recheckDataRoles(ctx context.Context, db *v1alpha1.Database, ob *observation) {
	n := ob.names
	for i, r := range ob.dataRoles {
		if !r.obs.Wanted || !r.verdict.Ready {
			continue
		}
		o := r.obs
		missing, err := e.pool.ObserveAccess(ctx, n.database, n.role, o.Role, postgres.Access(o.Access))
		o.Checked, o.Missing = err == nil, missing
		if err != nil {
			e.log.Debug("cannot check a data role's privileges after the access cleanup", "role", o.Name, "error", err)
		}
		ob.dataRoles[i].obs, ob.dataRoles[i].verdict = o, tenancy.DecideDataRole(o, e.id)
	}
	e.reportDataRoles(db, ob.dataRoles)
}
