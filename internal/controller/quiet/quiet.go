// Package quiet keeps the managed reconciler from sending status updates
// that change nothing.
//
// The managed reconciler writes a managed resource's status at the end of
// every reconcile, also when nothing changed: one PUT per resource per
// poll, which at thousands of Databases and DatabaseBindings makes the
// provider the apiserver's busiest client for no information. A Manager
// drops a status update whose status equals the cached copy of the same
// resourceVersion; every other write goes through. The cache is the one
// the reconcile read the object from, so an update it drops is one the
// apiserver would have taken as a no-op.
package quiet

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Manager is a manager as the managed reconciler sees it: its client's
// status writer drops the updates that change nothing.
type Manager struct {
	ctrl.Manager
}

// GetClient returns the manager's client with a quiet status writer.
func (m Manager) GetClient() client.Client {
	return Client{Client: m.Manager.GetClient(), Cache: m.GetCache()}
}

// Client is a client whose status writer drops the updates that change
// nothing, judged against Cache.
type Client struct {
	client.Client
	Cache client.Reader
}

// Status returns the quiet status writer.
func (c Client) Status() client.SubResourceWriter {
	return Writer{SubResourceWriter: c.Client.Status(), Cache: c.Cache}
}

// Writer is a status writer that drops the updates that change nothing.
type Writer struct {
	client.SubResourceWriter
	Cache client.Reader
}

// Update sends obj's status unless it equals that of the cached copy with
// the same resourceVersion.
func (w Writer) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && Unchanged(ctx, w.Cache, obj) {
		return nil
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// Unchanged reports whether obj (a pointer to a struct with a Status
// field) has the resourceVersion and the status of its cached copy.
func Unchanged(ctx context.Context, cache client.Reader, obj client.Object) bool {
	if obj.GetResourceVersion() == "" {
		return false
	}
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		return false
	}
	cached, ok := reflect.New(t.Elem()).Interface().(client.Object)
	if !ok {
		return false
	}
	if err := cache.Get(ctx, client.ObjectKeyFromObject(obj), cached); err != nil {
		return false
	}
	if cached.GetResourceVersion() != obj.GetResourceVersion() {
		return false
	}
	a, b := status(obj), status(cached)
	return a.IsValid() && b.IsValid() && equality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// status is the Status field of a pointer to a struct, or the zero Value.
func status(o client.Object) reflect.Value {
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("Status")
}
