package binding

import (
	"context"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// StepRoleCopy runs before a data role's delivery copy is written;
// StepRoleDatabase before the Database's data roles and extensions are
// written.
const (
	StepRoleCopy     = "RoleCopy"
	StepRoleDatabase = "RoleDatabase"
)

// roleCopyPath is the delivery copy of data role name.
func (e *external) roleCopyPath(name string) string {
	return tenancy.DataRoleDeliveryPath(e.copyPath(), name)
}

// roleCandidates are the data roles the binder looks at: those the binding
// asks for, those its status still shows, and, for a dynamic binding,
// those its Database lists (a role is removed from the Database only after
// its copy is gone, so the Database keeps naming every copy the binder
// may have written, even after this binding's status is lost).
//
// On deletion (all), every role its Database lists is looked at, a static
// binding's too.
func (e *external) roleCandidates(b *v1alpha1.DatabaseBinding, all bool) []string {
	var names []string
	for _, r := range e.spec.DataRoles {
		names = append(names, r.Name)
	}
	for _, r := range b.Status.AtProvider.DataRoles {
		names = append(names, r.Name)
	}
	if e.db != nil && (!e.spec.Static() || all) {
		for _, r := range e.db.Spec.ForProvider.DataRoles {
			names = append(names, r.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// roleProofKey is the memory of data role name's last delivery in sync;
// the Database controller keeps the role's proven login under
// memo.DataRoleKey.
func (e *external) roleProofKey(name string) types.UID {
	return types.UID(string(e.uid) + "/role/" + name)
}

// observeRoles decides every data role of a binding whose own credential
// is delivered, and reports them in the binding's status. It returns
// whether nothing is left to write.
func (e *external) observeRoles(ctx context.Context, b *v1alpha1.DatabaseBinding) (bool, error) {
	e.roles, e.roleVersions = nil, map[string]int{}
	db := e.db
	// The data roles' records live under the path a provisioning
	// Database's record has, an import's too (its own record is the
	// admin's).
	src := tenancy.CredentialPath(e.opts.OpenBao.DatabaseBasePath, db.GetName())
	now := time.Now()
	for _, name := range e.roleCandidates(b, false) {
		o := tenancy.RoleDeliveryObservation{Name: name, Delivery: tenancy.DeliveryObservation{
			Spec: e.spec, DatabaseName: db.GetName(), DatabaseUID: string(db.GetUID()),
			SourcePath: tenancy.DataRolePath(src, name), CopyPath: e.roleCopyPath(name),
		}}
		if i := slices.IndexFunc(e.spec.DataRoles, func(r v1alpha1.BindingDataRole) bool { return r.Name == name }); i >= 0 {
			o.Wanted, o.Access = true, e.spec.DataRoles[i].Access
		}
		if i := slices.IndexFunc(db.Spec.ForProvider.DataRoles, func(r v1alpha1.DataRole) bool { return r.Name == name }); i >= 0 {
			o.OnDatabase, o.DatabaseAccess = true, db.Spec.ForProvider.DataRoles[i].Access
		}
		if i := slices.IndexFunc(db.Status.AtProvider.DataRoles, func(r v1alpha1.DataRoleObservation) bool { return r.Name == name }); i >= 0 {
			o.DatabaseReady = db.Status.AtProvider.DataRoles[i].Ready
		}
		proof := tenancy.DeliveryProof{DatabaseUID: o.Delivery.DatabaseUID, SourcePath: o.Delivery.SourcePath, CopyPath: o.Delivery.CopyPath}
		var err error
		switch {
		case o.NeedsSource() && e.rememberedAt(e.roleProofKey(name), memo.DataRoleKey(types.UID(o.Delivery.DatabaseUID), name), proof, now):
			metrics.DeliveryRemembered()
			e.roles = append(e.roles, tenancy.RoleDeliveryVerdict{Name: name, Action: tenancy.RoleInSync})
			continue
		case o.NeedsSource():
			if o.Delivery.Source, err = e.read(ctx, o.Delivery.SourcePath); err != nil {
				_, err = e.kvFailed(b, "read the credential record of data role "+name, err)
				return false, err
			}
			metrics.DeliveryRead()
			e.roleVersions[name] = o.Delivery.Source.Version
		}
		if o.NeedsSource() || !o.Wanted {
			if o.Delivery.Copy, err = e.read(ctx, o.Delivery.CopyPath); err != nil {
				_, err = e.kvFailed(b, "read the delivery copy of data role "+name, err)
				return false, err
			}
		}
		if !o.Wanted && o.Delivery.Copy.Present && tenancy.CopyOwnedBy(o.Delivery.Copy.Owner, e.spec) {
			if o.Readers, err = e.readers(ctx, b.GetNamespace(), o.Delivery.CopyPath); err != nil {
				return false, err
			}
		}
		v := tenancy.DecideRoleDelivery(o, e.spec.Static())
		if v.Action == tenancy.RoleInSync && e.proofs != nil && e.records != nil && e.opts.LoginCheckInterval > 0 {
			proof.SourceVersion = o.Delivery.Source.Version
			proof.Due = tenancy.NextLoginDue(now, e.opts.LoginCheckInterval, e.proofs.Spread())
			e.proofs.Put(e.roleProofKey(name), proof, now)
		} else if e.proofs != nil {
			e.proofs.Forget(e.roleProofKey(name))
		}
		e.roles = append(e.roles, v)
	}
	e.reportRoles(b)
	for _, v := range e.roles {
		switch v.Action {
		case tenancy.RoleWrite, tenancy.RoleAdd, tenancy.RoleDeleteCopy, tenancy.RoleRemove:
			return false, nil
		}
	}
	_, _, changed := e.databaseSpec()
	return !changed, nil
}

// rememberedAt reports whether the last delivery in sync remembered under
// key still stands, while the Database controller proves the record
// version under record.
func (e *external) rememberedAt(key, record types.UID, cur tenancy.DeliveryProof, now time.Time) bool {
	if e.proofs == nil || e.records == nil || e.opts.LoginCheckInterval <= 0 {
		return false
	}
	ver, ok := e.records.RecordVersion(record, now)
	return tenancy.DeliveryCheckDue(tenancy.DeliveryCheck{
		Last: e.proofs.Get(key), Now: cur, RecordVersion: ver, RecordProven: ok, Time: now,
	}) == ""
}

// reportRoles writes the data roles' deliveries into the binding's status
// and, when a wanted role is not in sync, its Ready condition (the phase
// stays Ready: the owner's credential is delivered).
func (e *external) reportRoles(b *v1alpha1.DatabaseBinding) {
	var wanted []string
	for _, r := range e.spec.DataRoles {
		wanted = append(wanted, r.Name)
	}
	var out []v1alpha1.BindingDataRoleObservation
	for _, v := range e.roles {
		if !slices.Contains(wanted, v.Name) && v.Action != tenancy.RoleWait && v.Action != tenancy.RoleDeleteCopy {
			continue
		}
		r := v1alpha1.BindingDataRoleObservation{Name: v.Name, Ready: v.Action == tenancy.RoleInSync, Message: v.Message}
		if e.db != nil {
			r.Role = tenancy.DataRoleName(e.obs.Database.LoginRole, v.Name)
		}
		var last v1alpha1.CredentialObservation
		if i := slices.IndexFunc(b.Status.AtProvider.DataRoles, func(o v1alpha1.BindingDataRoleObservation) bool { return o.Name == v.Name }); i >= 0 {
			last = b.Status.AtProvider.DataRoles[i].Credential
		}
		if r.Ready {
			r.Credential = versioned(e.credentialAt(e.roleCopyPath(v.Name)), e.roleVersions[v.Name], last)
		} else {
			// Where it was delivered stays shown while it is written again.
			r.Credential = last
		}
		out = append(out, r)
	}
	b.Status.AtProvider.DataRoles = out
	if ok, reason, msg := tenancy.RoleDeliveriesSummary(e.roles, wanted); !ok {
		if reason != tenancy.ReasonDelivering && reason != tenancy.ReasonDataRoleNotReady {
			metrics.Failure("binding", reason)
		}
		setReady(b, reason, msg)
	}
}

// rolesDelivered reports whether every data role the binding asks for has
// its copy in sync.
func (e *external) rolesDelivered() bool {
	var wanted []string
	for _, r := range e.spec.DataRoles {
		wanted = append(wanted, r.Name)
	}
	ok, _, _ := tenancy.RoleDeliveriesSummary(e.roles, wanted)
	return ok
}

// updateRoles carries out the data role verdicts: copies written, copies
// of removed roles deleted, and a dynamic Database's data roles added or
// removed. Every step is retried by the next reconcile on failure.
func (e *external) updateRoles(ctx context.Context, b *v1alpha1.DatabaseBinding) error {
	var errs []error
	for i, v := range e.roles {
		switch v.Action {
		case tenancy.RoleWrite:
			if err := e.writeRoleCopy(ctx, v); err != nil {
				errs = append(errs, err)
				continue
			}
			e.roles[i] = tenancy.RoleDeliveryVerdict{Name: v.Name, Action: tenancy.RoleInSync}
		case tenancy.RoleDeleteCopy:
			if err := e.deleteCopyAt(ctx, e.roleCopyPath(v.Name)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := e.writeDatabaseSpec(ctx); err != nil {
		errs = append(errs, err)
	}
	e.reportRoles(b)
	return errors.Join(errs...)
}

func (e *external) writeRoleCopy(ctx context.Context, v tenancy.RoleDeliveryVerdict) error {
	p, d := e.roleCopyPath(v.Name), v.Delivery
	if d.Claim {
		if err := e.kv.ClaimPath(ctx, p, d.Owner); err != nil {
			if errors.Is(err, openbao.ErrCASMismatch) {
				err = errors.Errorf("the delivery path %s was taken by another writer since it was read", p)
			}
			return errors.Errorf("cannot copy the credential of data role %s: %w", v.Name, err)
		}
	}
	if h := e.hook; h != nil {
		if err := h(StepRoleCopy); err != nil {
			return err
		}
	}
	if _, err := e.kv.Write(ctx, p, d.Data, d.CAS); err != nil {
		if errors.Is(err, openbao.ErrCASMismatch) {
			err = errors.Errorf("the delivery copy %s changed since it was read", p)
		}
		return errors.Errorf("cannot copy the credential of data role %s: %w", v.Name, err)
	}
	if err := e.kv.SetOwner(ctx, p, d.Owner); err != nil {
		return errors.Errorf("cannot copy the credential of data role %s: %w", v.Name, err)
	}
	return nil
}

// databaseSpec is the dynamic Database's spec.forProvider.dataRoles and
// extensions as the binding and the data role verdicts want them, and
// whether either differs from the Database's: the one path by which a
// Tenant's later edits reach its Database (a static binding's Database is
// the admin's, and nothing is written to it).
func (e *external) databaseSpec() (roles []v1alpha1.DataRole, exts []string, changed bool) {
	if e.spec.Static() || e.db == nil {
		return nil, nil, false
	}
	roles, rc := tenancy.DatabaseDataRoles(e.db.Spec.ForProvider.DataRoles, e.spec.DataRoles, e.roles)
	exts, xc := tenancy.DatabaseExtensions(e.db.Spec.ForProvider.Extensions, e.spec.Extensions)
	return roles, exts, rc || xc
}

// writeDatabaseSpec writes what databaseSpec decided into the dynamic
// Database, with the resourceVersion read (a conflict is retried by the
// next reconcile, which reads and decides again).
func (e *external) writeDatabaseSpec(ctx context.Context) error {
	roles, exts, changed := e.databaseSpec()
	if !changed {
		return nil
	}
	if h := e.hook; h != nil {
		if err := h(StepRoleDatabase); err != nil {
			return err
		}
	}
	db := e.db.DeepCopy()
	db.Spec.ForProvider.DataRoles, db.Spec.ForProvider.Extensions = roles, exts
	if err := e.kube.Update(ctx, db); err != nil {
		return errors.Errorf("cannot write the data roles and extensions of Database %s: %w", db.GetName(), err)
	}
	return nil
}

// deleteCopyAt deletes the copy at p (every version) if its metadata names
// this binding.
func (e *external) deleteCopyAt(ctx context.Context, p string) error {
	rec, err := e.kv.Read(ctx, p)
	if err != nil {
		return errors.Errorf("cannot read the delivery copy %s to delete it: %w", p, err)
	}
	if rec == nil || !tenancy.CopyOwnedBy(rec.Owner, e.spec) {
		return nil
	}
	if err := e.kv.Delete(ctx, p); err != nil {
		return errors.Errorf("cannot delete the delivery copy %s: %w", p, err)
	}
	return nil
}

// roleCopyPaths are the delivery copies of every candidate data role.
func (e *external) roleCopyPaths(b *v1alpha1.DatabaseBinding) []string {
	var out []string
	for _, n := range e.roleCandidates(b, true) {
		out = append(out, e.roleCopyPath(n))
	}
	return out
}
