package function

import (
	"context"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
)

// RunFunction reads the Tenant and its composed resources from the request,
// and answers with the long TTL, the resources, their readiness and the
// Tenant's status.
func TestRunFunction(t *testing.T) {
	req := &fnv1.RunFunctionRequest{
		Input: resource.MustStructJSON(`{"apiVersion":"fn.database.ayatori.ddupan.top/v1beta1","kind":"Input","secretStore":"bao","refreshInterval":"30m"}`),
		Observed: &fnv1.State{
			Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{"apiVersion":"database.ayatori.ddupan.top/v1alpha1","kind":"Tenant",
				"metadata":{"name":"shop","namespace":"app","uid":"t-1"},"spec":{"instanceRef":"pg1"},"status":{"phase":"Provisioning"}}`)},
			Resources: map[string]*fnv1.Resource{
				NameBinding: {Resource: resource.MustStructJSON(`{"apiVersion":"database.ayatori.ddupan.top/v1alpha1","kind":"DatabaseBinding",
					"metadata":{"name":"shop","namespace":"app"},
					"status":{"atProvider":{"phase":"Ready","credential":{"path":"tenants/app/shop"}},
					"conditions":[{"type":"Ready","status":"True","reason":"Available"}]}}`)},
			},
		},
		Desired: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{"apiVersion":"database.ayatori.ddupan.top/v1alpha1","kind":"Tenant"}`)}},
	}
	rsp, err := (&Function{}).RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			t.Fatalf("fatal result: %s", r.GetMessage())
		}
	}
	if got := rsp.GetMeta().GetTtl().AsDuration(); got != 24*time.Hour {
		t.Errorf("TTL %s, want 24h", got)
	}
	ready := map[string]fnv1.Ready{}
	for n, r := range rsp.GetDesired().GetResources() {
		ready[n] = r.GetReady()
	}
	want := map[string]fnv1.Ready{NameBinding: fnv1.Ready_READY_TRUE, NameExternalSecret: fnv1.Ready_READY_FALSE}
	if diff := cmp.Diff(want, ready); diff != "" {
		t.Errorf("desired resources and readiness (-want +got):\n%s", diff)
	}
	es := rsp.GetDesired().GetResources()[NameExternalSecret].GetResource().AsMap()
	spec := es["spec"].(map[string]any)
	if spec["refreshInterval"] != "30m" || spec["secretStoreRef"].(map[string]any)["name"] != "bao" {
		t.Errorf("the input was not used: %v", spec)
	}
	xr := rsp.GetDesired().GetComposite()
	if xr.GetReady() != fnv1.Ready_READY_FALSE {
		t.Errorf("the Tenant is %v, want not ready until its Secret is synced", xr.GetReady())
	}
	st := xr.GetResource().AsMap()["status"].(map[string]any)
	if st["phase"] != PhaseExternalSecretCreated || st["database"] != "shop" {
		t.Errorf("status %v", st)
	}
}

// An input that is not the function's is refused with a fatal result
// naming it, not composed with defaults.
func TestRunFunctionWithBadInput(t *testing.T) {
	rsp, err := (&Function{}).RunFunction(context.Background(), &fnv1.RunFunctionRequest{
		Input: resource.MustStructJSON(`{"apiVersion":"fn.database.ayatori.ddupan.top/v1beta1","kind":"Input","secretStore":7}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rsp.GetResults()) != 1 || rsp.GetResults()[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
		t.Errorf("results %v, want one fatal", rsp.GetResults())
	}
}
