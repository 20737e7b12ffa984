package database_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestPresetReclaimAnnotationNeverDrops: a Database whose spec says Retain
// carries, before its deletion starts, a reclaim annotation saying Delete
// (written by hand, re-applied by GitOps, restored from a backup of another
// object, or naming its own UID with a time before the deletion). It is
// deleted: nothing is dropped, the annotation is replaced by the record of
// this deletion (Retain), and a Warning Event says the value was ignored.
func TestPresetReclaimAnnotationNeverDrops(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// preset is the value written before the deletion (d is the live
		// object, for a value naming its own UID).
		preset func(d *v1alpha1.Database) string
	}{
		{name: "preset-bare", preset: func(*v1alpha1.Database) string { return string(v1alpha1.ReclaimDelete) }},
		{name: "preset-restored", preset: func(*v1alpha1.Database) string {
			return tenancy.ReclaimRecord(v1alpha1.ReclaimDelete, "uid-of-the-backed-up-object", time.Now().Add(-time.Hour))
		}},
		{name: "preset-own-uid", preset: func(d *v1alpha1.Database) string {
			return tenancy.ReclaimRecord(v1alpha1.ReclaimDelete, string(d.GetUID()), time.Now())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.name
			db := strings.ReplaceAll(name, "-", "_")
			d := newDB(db, func(d *v1alpha1.Database) {
				d.Name = name
				d.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
			})
			apply(t, d)
			waitDB(t, d, "Ready", ready)

			// Written on the live object, as kubectl annotate or a
			// GitOps sync would, the second before the deletion.
			preset := tc.preset(d)
			before := d.DeepCopy()
			a := d.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[database.AnnotationReclaimAtDeletion] = preset
			d.SetAnnotations(a)
			if err := env.Kube.Client.Patch(ctx, d, client.MergeFrom(before)); err != nil {
				t.Fatal(err)
			}
			if got := d.GetAnnotations()[database.AnnotationReclaimAtDeletion]; got != preset {
				t.Fatalf("the annotation reads %q after the patch, want %q", got, preset)
			}
			time.Sleep(1100 * time.Millisecond) // the deletion starts in a later second
			if err := env.Kube.Client.Delete(ctx, d); err != nil {
				t.Fatal(err)
			}
			waitGone(t, d)

			if s := readPG(t, db, db); !s.DBExists || !s.RoleExists {
				t.Errorf("reclaimPolicy Retain with a pre-set annotation %q: pg %+v; want database and role kept", preset, s)
			}
			if k := readKV(t, dbPath(name)); !k.Exists {
				t.Errorf("reclaimPolicy Retain with a pre-set annotation %q: the record was deleted", preset)
			}
			if err := testenv.WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
				l := &corev1.EventList{}
				if err := env.Kube.Client.List(ctx, l, client.InNamespace(corev1.NamespaceAll)); err != nil {
					return err
				}
				for _, e := range l.Items {
					if e.InvolvedObject.UID == d.GetUID() && e.Reason == "ReclaimRecordIgnored" && e.Type == corev1.EventTypeWarning &&
						strings.Contains(e.Message, "(Retain)") {
						return nil
					}
				}
				return testenv.ErrNotYet
			}); err != nil {
				t.Errorf("no Warning Event ReclaimRecordIgnored naming Retain for %s: %v", name, err)
			}
		})
	}
}
