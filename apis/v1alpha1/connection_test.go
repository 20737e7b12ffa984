package v1alpha1_test

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// crossplane-runtime's managed reconciler publishes connection details
// with these publishers, which write a Kubernetes Secret for a resource
// naming one. A Database or DatabaseBinding whose stored spec names one
// (stored before the CRD refused the field) still gets no Secret: its
// GetWriteConnectionSecretToReference is always nil.
func TestConnectionDetailsAreNeverPublished(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	details := managed.ConnectionDetails{"password": []byte("connection-canary-PASSWORD")}

	b := dynamic(nil)
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: b.Name + "-conn"}
	published, err := managed.NewAPILocalSecretPublisher(c, c.Scheme()).PublishConnection(ctx, b, details)
	if err != nil || published {
		t.Errorf("DatabaseBinding: published %v, %v; want nothing published", published, err)
	}
	wantNoSecret(ctx, t, c, types.NamespacedName{Namespace: b.Namespace, Name: b.Name + "-conn"})

	d := db(nil)
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Spec.WriteConnectionSecretToReference = &xpv2.SecretReference{Namespace: ns, Name: d.Name + "-conn"}
	published, err = managed.NewAPISecretPublisher(c, c.Scheme()).PublishConnection(ctx, d, details)
	if err != nil || published {
		t.Errorf("Database: published %v, %v; want nothing published", published, err)
	}
	wantNoSecret(ctx, t, c, types.NamespacedName{Namespace: ns, Name: d.Name + "-conn"})
}

func wantNoSecret(ctx context.Context, t *testing.T, c client.Client, key types.NamespacedName) {
	t.Helper()
	if err := c.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("Secret %s: %v, want none", key, err)
	}
}
