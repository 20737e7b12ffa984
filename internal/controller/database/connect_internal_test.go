package database

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestDeletingInTerminatingNamespace(t *testing.T) {
	terminating := kerrors.NewForbidden(schema.GroupResource{Resource: "providerconfigusages"}, "u", errors.New("unable to create new content in namespace app because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause})
	otherForbidden := kerrors.NewForbidden(schema.GroupResource{Resource: "providerconfigusages"}, "u", errors.New("RBAC says no"))
	now := metav1.Now()
	deleting := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	live := &v1alpha1.Database{}
	cases := map[string]struct {
		db   *v1alpha1.Database
		err  error
		want bool
	}{
		"DeletingInTerminatingNamespace": {db: deleting, err: errors.Wrap(terminating, "cannot apply ProviderConfigUsage"), want: true},
		"LiveInTerminatingNamespace":     {db: live, err: terminating, want: false},
		"DeletingOtherForbidden":         {db: deleting, err: otherForbidden, want: false},
		"DeletingOtherError":             {db: deleting, err: errors.New("boom"), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, deletingInTerminatingNamespace(tc.db, tc.err)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
