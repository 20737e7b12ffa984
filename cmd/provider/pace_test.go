package main

import (
	"context"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/pace"
)

// listed is a cache holding the given Databases and DatabaseBindings.
type listed struct {
	client.Reader
	dbs []v1alpha1.Database
	bs  []v1alpha1.DatabaseBinding
}

func (l listed) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch ls := list.(type) {
	case *v1alpha1.DatabaseList:
		ls.Items = l.dbs
	case *v1alpha1.DatabaseBindingList:
		ls.Items = l.bs
	}
	return nil
}

// The pace counts what the cache holds: every Database and binding, and as
// arriving only those created recently whose Ready condition is not True.
func TestPolledResourcesCountsArrivals(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	meta := func(age time.Duration) metav1.ObjectMeta {
		return metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}
	}
	ready := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable}
	creating := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ReasonCreating}
	newReady, newCreating, oldFailing := v1alpha1.Database{ObjectMeta: meta(time.Second)}, v1alpha1.Database{ObjectMeta: meta(time.Second)}, v1alpha1.Database{ObjectMeta: meta(time.Hour)}
	newReady.SetConditions(ready)
	newCreating.SetConditions(creating)
	oldFailing.SetConditions(creating)
	newBinding := v1alpha1.DatabaseBinding{ObjectMeta: meta(time.Second)} // no status yet
	readyBinding := v1alpha1.DatabaseBinding{ObjectMeta: meta(time.Second)}
	readyBinding.SetConditions(ready)

	got, err := polledResources(listed{
		dbs: []v1alpha1.Database{newReady, newCreating, oldFailing},
		bs:  []v1alpha1.DatabaseBinding{newBinding, readyBinding},
	}, func() time.Time { return now })(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pace.Load{Resources: 5, Arriving: 2}, got); diff != "" {
		t.Errorf("load (-want +got):\n%s", diff)
	}
}
