package binding

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// maxWritesToReady is the most writes of a dynamic binding, from its
// create to Ready, that this binder makes: the finalizer with the create
// mark, the Database being created (Creating), the claim recorded with the
// wait for the Database, Ready. Before: six (the finalizer and the create
// mark in two writes, the record and the wait in two status writes).
const maxWritesToReady = 4

// A dynamic DatabaseBinding is written at most maxWritesToReady times from
// its create until it is Ready (its Database made Ready meanwhile, as its
// controller would): each write of a composed binding makes Crossplane
// render its Tenant again. Counted from a watch of the binding: every
// resourceVersion it takes after its create.
func TestBindingWritesUntilReady(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimDelete)
	uid := tenant(t, ns, "count", "count-db")
	wc, err := client.NewWithWatch(env.Kube.Config, client.Options{Scheme: env.Kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &v1alpha1.DatabaseBindingList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	b := &v1alpha1.DatabaseBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "count-db"},
		Spec: v1alpha1.DatabaseBindingSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: inst}},
			ForProvider:         v1alpha1.DatabaseBindingParameters{Tenant: v1alpha1.TenantReference{Name: "count", UID: uid}, Database: ptr.To("count")},
		},
	}
	create(t, b)
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + uid}}
	madeReady := false
	var writes []string
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the binding was not Ready in %s; its writes:\n%s", timeout, strings.Join(writes, "\n"))
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			nb, isBinding := ev.Object.(*v1alpha1.DatabaseBinding)
			if !isBinding || ev.Type != watch.Modified {
				continue
			}
			r := nb.GetCondition(xpv2.TypeReady)
			writes = append(writes, fmt.Sprintf("rv %s: finalizers %v, annotations %v, phase %q, Ready %s/%s %q, Synced %s",
				nb.GetResourceVersion(), nb.GetFinalizers(), slices.Sorted(maps.Keys(nb.GetAnnotations())), nb.Status.AtProvider.Phase, r.Status, r.Reason, r.Message, nb.GetCondition(xpv2.TypeSynced).Status))
			if !madeReady && nb.Status.AtProvider.DatabaseUID != "" {
				if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err == nil {
					makeReady(t, db, "count-secret")
					madeReady = true
				}
			}
			if !available(nb) {
				continue
			}
			// Nothing more once Ready (a poll or two).
			time.Sleep(4 * poll)
			for drained := false; !drained; {
				select {
				case ev := <-w.ResultChan():
					if nb, ok := ev.Object.(*v1alpha1.DatabaseBinding); ok && ev.Type == watch.Modified {
						writes = append(writes, "after Ready: rv "+nb.GetResourceVersion())
					}
				default:
					drained = true
				}
			}
			t.Logf("%d writes of the binding until Ready:\n%s", len(writes), strings.Join(writes, "\n"))
			if len(writes) > maxWritesToReady {
				t.Errorf("the binding was written %d times until Ready (and after), want at most %d", len(writes), maxWritesToReady)
			}
			if err := env.Kube.Client.Delete(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			awaitGone(t, b, "the binding")
			return
		}
	}
}
