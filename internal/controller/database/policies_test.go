package database

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// A Database's managementPolicies decide what the provider may do: without
// Create it imports, without Update it never changes the password, without
// Delete its deletion drops nothing; "*" allows everything.
func TestManagementPolicies(t *testing.T) {
	const (
		obs = xpv2.ManagementActionObserve
		crt = xpv2.ManagementActionCreate
		upd = xpv2.ManagementActionUpdate
		del = xpv2.ManagementActionDelete
		li  = xpv2.ManagementActionLateInitialize
	)
	for name, tc := range map[string]struct {
		p                      xpv2.ManagementPolicies
		create, update, delete bool
	}{
		"Default":       {p: v1alpha1.DefaultManagementPolicies, create: true, update: true, delete: true},
		"All":           {p: xpv2.ManagementPolicies{xpv2.ManagementActionAll}, create: true, update: true, delete: true},
		"ObserveOnly":   {p: xpv2.ManagementPolicies{obs}},
		"ImportDelete":  {p: xpv2.ManagementPolicies{obs, del}, delete: true},
		"ImportUpdate":  {p: xpv2.ManagementPolicies{obs, upd, li}, update: true},
		"NoUpdate":      {p: xpv2.ManagementPolicies{obs, crt, del}, create: true, delete: true},
		"NoDelete":      {p: xpv2.ManagementPolicies{obs, crt, upd, li}, create: true, update: true},
		"ImportNoLater": {p: xpv2.ManagementPolicies{obs, upd}, update: true},
	} {
		t.Run(name, func(t *testing.T) {
			db := &v1alpha1.Database{}
			db.SetManagementPolicies(tc.p)
			p := policies(db)
			if got := p.ShouldCreate(); got != tc.create {
				t.Errorf("create = %v, want %v", got, tc.create)
			}
			if got := p.ShouldUpdate(); got != tc.update {
				t.Errorf("update = %v, want %v", got, tc.update)
			}
			if got := p.ShouldDelete(); got != tc.delete {
				t.Errorf("delete = %v, want %v", got, tc.delete)
			}
			if got := rotationRequest(db).MayUpdate; got != tc.update {
				t.Errorf("rotation may update = %v, want %v", got, tc.update)
			}
		})
	}
}
