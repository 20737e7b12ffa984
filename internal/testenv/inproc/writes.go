package inproc

import (
	"context"
	"fmt"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Writes counts the requests the in-process Database and binding
// controllers send to write an object (create, update, patch, delete, and
// their status updates and patches), by kind and name: what reaches the
// API server, whether or not it changed anything there.
type Writes struct {
	mu sync.Mutex
	n  map[string]int
}

// NewWrites returns an empty count.
func NewWrites() *Writes { return &Writes{n: map[string]int{}} }

// Of is the count of writes of the object kind/name so far (kind as Go
// names its type, e.g. "Database").
func (w *Writes) Of(kind, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[kind+"/"+name]
}

func (w *Writes) add(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[kindOf(obj)+"/"+obj.GetName()]++
}

func kindOf(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] == '.' {
			return t[i+1:]
		}
	}
	return t
}

// countingManager is a manager whose client counts its writes.
type countingManager struct {
	ctrl.Manager
	w *Writes
}

func (m countingManager) GetClient() client.Client {
	return countingClient{Client: m.Manager.GetClient(), w: m.w}
}

type countingClient struct {
	client.Client
	w *Writes
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.w.add(obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.w.add(obj)
	// unguarded-update: the controllers' own write, passed through and counted
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.w.add(obj)
	return c.Client.Patch(ctx, obj, p, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.w.add(obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), w: c.w}
}

type countingStatus struct {
	client.SubResourceWriter
	w *Writes
}

func (s countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.w.add(obj)
	// unguarded-update: the controllers' own write, passed through and counted
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	s.w.add(obj)
	return s.SubResourceWriter.Patch(ctx, obj, p, opts...)
}
