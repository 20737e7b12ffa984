package database

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// reportSize copies the database's size from the config's last size
// refresh into status.atProvider.size, when it moved enough
// (tenancy.SizeWorthWriting): no query here.
func (e *external) reportSize(db *v1alpha1.Database, o *observation) {
	ap := &db.Status.AtProvider
	if !o.owner.DB.Exists {
		ap.Size = nil
		return
	}
	b, at, ok := e.sizes.Get(e.cfgUID, o.names.database)
	if !ok || !tenancy.SizeWorthWriting(ap.Size, b) {
		return
	}
	ap.Size = &v1alpha1.DatabaseSize{Bytes: b, Human: tenancy.HumanBytes(b), MeasuredAt: &metav1.Time{Time: at}}
}
