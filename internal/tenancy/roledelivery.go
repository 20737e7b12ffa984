package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Reasons of a DatabaseBinding's Ready condition about its data roles.
const (
	// ReasonDataRoleNotReady: a data role the Tenant asks for is not (yet)
	// Ready on its Database.
	ReasonDataRoleNotReady = "DataRoleNotReady"
	// ReasonDataRoleUnavailable: a static binding asks for a data role its
	// Database does not have (only an admin adds one there), or for
	// another access than the Database's role has.
	ReasonDataRoleUnavailable = "DataRoleUnavailable"
)

// DataRoleDeliveryPath is the delivery copy of the data role name, beside
// the owner's delivery copy at copyPath.
func DataRoleDeliveryPath(copyPath, name string) string { return copyPath + "/roles/" + name }

// RoleDeliveryObservation is one data role as the binder reads it: one the
// binding asks for, one its Database lists, or one whose delivery the
// binding's status still shows.
type RoleDeliveryObservation struct {
	Name string
	// Wanted: the binding lists it, with Access.
	Wanted bool
	Access v1alpha1.DataAccess
	// OnDatabase: the Database's spec lists it, with DatabaseAccess.
	OnDatabase     bool
	DatabaseAccess v1alpha1.DataAccess
	// DatabaseReady: the Database's status shows the role Ready. Only a
	// gate: what is copied is proven by the record's own metadata.
	DatabaseReady bool
	// Readers are the ExternalSecrets of the binding's namespace that read
	// its delivery copy (read only for a role no longer wanted whose copy
	// is this binding's).
	Readers []string
	// Delivery is the role's record (Source, read only for a wanted role
	// Ready on its Database) and its delivery copy (Copy).
	Delivery DeliveryObservation
}

// RoleDeliveryAction is what the binder does with one data role.
type RoleDeliveryAction string

// Role delivery actions.
const (
	// RoleInSync: the copy holds the role's current credential.
	RoleInSync RoleDeliveryAction = "InSync"
	// RoleWrite: write the copy as RoleDeliveryVerdict.Delivery says.
	RoleWrite RoleDeliveryAction = "Write"
	// RoleAdd: add the role to the (dynamic) Database's spec.
	RoleAdd RoleDeliveryAction = "AddToDatabase"
	// RoleWait: something else must happen first (Reason, Message).
	RoleWait RoleDeliveryAction = "Wait"
	// RoleRefuse: a human must act (Reason, Message).
	RoleRefuse RoleDeliveryAction = "Refuse"
	// RoleDeleteCopy: delete the copy of a role no longer wanted, which no
	// ExternalSecret reads any more.
	RoleDeleteCopy RoleDeliveryAction = "DeleteCopy"
	// RoleRemove: remove the role from the (dynamic) Database's spec: it is
	// no longer wanted and its copy is gone.
	RoleRemove RoleDeliveryAction = "RemoveFromDatabase"
	// RoleNone: nothing to do (not wanted, nothing of it delivered).
	RoleNone RoleDeliveryAction = "None"
)

// RoleDeliveryVerdict is the decision on one data role.
type RoleDeliveryVerdict struct {
	Name     string
	Action   RoleDeliveryAction
	Delivery DeliveryVerdict
	// Reason and Message when the role is wanted and not in sync.
	Reason, Message string
}

// NeedsSource reports whether the role's record must be read: it is wanted
// and its Database shows it Ready with the access asked for.
func (o RoleDeliveryObservation) NeedsSource() bool {
	return o.Wanted && o.OnDatabase && o.DatabaseAccess == o.Access && o.DatabaseReady
}

// DecideRoleDelivery decides one data role of a binding whose own
// credential is delivered. static: the binding names an existing Database,
// whose data roles are the admin's (never added or removed by the binder).
//
// A role no longer wanted goes in this order: its ExternalSecrets first (the
// Tenant's Composition stops composing them), then its delivery copy, then,
// for a dynamic binding, the role itself (removed from the Database, whose
// controller drops it).
func DecideRoleDelivery(o RoleDeliveryObservation, static bool) RoleDeliveryVerdict {
	v := RoleDeliveryVerdict{Name: o.Name}
	d := o.Delivery
	if !o.Wanted {
		switch {
		case d.Copy.Present && CopyOwnedBy(d.Copy.Owner, d.Spec) && len(o.Readers) > 0:
			v.Action, v.Reason = RoleWait, ReasonWaitingForExternalSecret
			v.Message = fmt.Sprintf("data role %s is no longer asked for: waiting for %s of this namespace, which reads its credential, to be deleted before its delivery copy is removed", o.Name, describeReaders(o.Readers))
		case d.Copy.Present && CopyOwnedBy(d.Copy.Owner, d.Spec):
			v.Action = RoleDeleteCopy
		case !static && o.OnDatabase:
			v.Action = RoleRemove
		default:
			v.Action = RoleNone
		}
		return v
	}
	switch {
	case !o.OnDatabase && static:
		v.Action, v.Reason = RoleRefuse, ReasonDataRoleUnavailable
		v.Message = fmt.Sprintf("Database %s has no data role %s: the data roles of an existing Database are its platform team's; ask them to add %s (access %s) to it", d.DatabaseName, o.Name, o.Name, o.Access)
	case !o.OnDatabase:
		v.Action, v.Reason = RoleAdd, ReasonDataRoleNotReady
		v.Message = fmt.Sprintf("adding data role %s to Database %s", o.Name, d.DatabaseName)
	case o.DatabaseAccess != o.Access && static:
		v.Action, v.Reason = RoleRefuse, ReasonDataRoleUnavailable
		v.Message = fmt.Sprintf("Database %s's data role %s has access %s, not %s: ask your platform team, or ask for %s", d.DatabaseName, o.Name, o.DatabaseAccess, o.Access, o.DatabaseAccess)
	case o.DatabaseAccess != o.Access:
		// Removed and asked for again with another access before its
		// removal finished: a role's access is never changed in place.
		v.Action, v.Reason = RoleRefuse, ReasonDataRoleUnavailable
		v.Message = fmt.Sprintf("data role %s still exists with access %s: remove it from the Tenant, wait until the Tenant's status no longer lists it, then add it with access %s", o.Name, o.DatabaseAccess, o.Access)
	case !o.DatabaseReady:
		v.Action, v.Reason = RoleWait, ReasonDataRoleNotReady
		v.Message = fmt.Sprintf("data role %s of Database %s is not Ready yet; if this lasts, your platform team sees why in the Database's status", o.Name, d.DatabaseName)
	default:
		src := d.Source
		if src.Present && src.Owner[MetaDataRole] != o.Name {
			// The role's record is proven by its own metadata, never by
			// the Database's status: a record written for another entry
			// (or the owner's) is never handed out as this role's.
			v.Action, v.Reason = RoleRefuse, ReasonCredentialProjectionFailed
			v.Message = fmt.Sprintf("the credential record %s was not written for data role %s of Database %s: it is not copied", d.SourcePath, o.Name, d.DatabaseName)
			return v
		}
		dv := DecideDelivery(d)
		v.Delivery = dv
		switch {
		case dv.InSync:
			v.Action = RoleInSync
		case dv.Write:
			v.Action, v.Reason = RoleWrite, ReasonDelivering
			v.Message = fmt.Sprintf("copying the credential of data role %s to %s", o.Name, d.CopyPath)
			v.Delivery.Owner[MetaDataRole] = o.Name
		default:
			v.Action, v.Reason, v.Message = RoleRefuse, dv.Reason, dv.Message
		}
	}
	return v
}

// RoleDeliveriesSummary is what a binding's Ready condition says of its
// data roles: ok when every wanted role is in sync, else the first one's
// (by name) reason and message.
func RoleDeliveriesSummary(vs []RoleDeliveryVerdict, wanted []string) (ok bool, reason, message string) {
	for _, v := range sortedVerdicts(vs) {
		if slices.Contains(wanted, v.Name) && v.Action != RoleInSync {
			return false, v.Reason, v.Message
		}
	}
	return true, "", ""
}

func sortedVerdicts(vs []RoleDeliveryVerdict) []RoleDeliveryVerdict {
	out := slices.Clone(vs)
	slices.SortFunc(out, func(a, b RoleDeliveryVerdict) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// DatabaseDataRoles is a dynamic Database's spec.forProvider.dataRoles
// after the binder's verdicts: the roles to add appended with their access
// (the config's limits apply), the roles to remove left out, every other
// entry (with the limits an admin may have set) kept as it is. changed is
// false when nothing is added or removed.
func DatabaseDataRoles(cur []v1alpha1.DataRole, wanted []v1alpha1.BindingDataRole, vs []RoleDeliveryVerdict) (out []v1alpha1.DataRole, changed bool) {
	act := map[string]RoleDeliveryAction{}
	for _, v := range vs {
		act[v.Name] = v.Action
	}
	for _, r := range cur {
		if act[r.Name] == RoleRemove {
			changed = true
			continue
		}
		out = append(out, *r.DeepCopy())
	}
	for _, w := range wanted {
		if act[w.Name] == RoleAdd && !slices.ContainsFunc(out, func(r v1alpha1.DataRole) bool { return r.Name == w.Name }) {
			out = append(out, v1alpha1.DataRole{Name: w.Name, Access: w.Access})
			changed = true
		}
	}
	return out, changed
}

// DatabaseExtensions is a dynamic Database's spec.forProvider.extensions
// once the binding's are added: the Database's own in their order, then
// each one the binding asks for that it lacks. Extensions are append-only
// on both sides (the provider never drops one), so nothing is removed.
// changed is false when nothing is added.
func DatabaseExtensions(cur, wanted []string) (out []string, changed bool) {
	out = slices.Clone(cur)
	for _, x := range wanted {
		if !slices.Contains(out, x) {
			out = append(out, x)
			changed = true
		}
	}
	return out, changed
}

// Reasons of a DatabaseBinding's Ready condition about its extensions.
const (
	// ReasonExtensionsMissing: a static binding's Tenant asks for
	// extensions its bound Database does not have; the admin installs
	// them (a bound existing Database is the admin's). The credential is
	// delivered.
	ReasonExtensionsMissing = "ExtensionsMissing"
)

// StaticExtensionsProblem is the Ready reason and message of a static
// binding whose Tenant asks for extensions that are not installed in its
// Database (installed: the Database's status.atProvider.extensions), or
// "" for a dynamic binding (its extensions are added to its Database) and
// when every one is there.
func StaticExtensionsProblem(s BindingSpec, database string, installed []string) (reason, message string) {
	if !s.Static() {
		return "", ""
	}
	m := Missing(s.Extensions, installed)
	if len(m) == 0 {
		return "", ""
	}
	return ReasonExtensionsMissing, fmt.Sprintf("the Database %s this Tenant binds lacks the extensions %s it asks for: the credential is delivered, but a bound existing Database's extensions are installed by your platform team; ask them to install these", database, strings.Join(m, ", "))
}
