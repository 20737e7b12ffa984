package function

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ddupan.top/provider-postgresql-tenant/apis/function/v1beta1"
)

// TTL is how long Crossplane may keep a render's result before it renders
// the Tenant again with nothing changed. Everything Compose reads is the
// Tenant and its composed resources, which Crossplane watches (realtime
// compositions): any change to them, a hand edit or deletion of the
// ExternalSecret included, renders the Tenant at once. Nothing in the
// result depends on time, so a render on a timer finds nothing to do; the
// SDK's default of one minute made every idle Tenant render 60 times an
// hour. Crossplane also re-renders every Tenant on its --sync-interval
// (default one hour), which bounds how long a missed event could last.
const TTL = 24 * time.Hour

// LegacyAPIVersion is the legacy (claim-based) composite's apiVersion.
const LegacyAPIVersion = "legacy.database.ayatori.ddupan.top/v1alpha1"

// Function serves the Tenant composition function.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	// Log, when set, gets one debug line per render: the Tenant's name,
	// the phases read and the resources composed (never a credential).
	Log logging.Logger
}

// RunFunction renders one Tenant.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, TTL)

	in := &v1beta1.Input{}
	if err := request.GetInput(req, in); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the function's input"))
		return rsp, nil
	}
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the observed Tenant"))
		return rsp, nil
	}
	ocs, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the observed composed resources"))
		return rsp, nil
	}
	o := Observed{Input: Input{SecretStore: in.SecretStore, RefreshInterval: in.RefreshInterval}, Tenant: readTenant(xr.Resource.Object)}
	if oc, ok := ocs[NameBinding]; ok {
		o.Binding = readBinding(oc.Resource.Object)
	}
	if oc, ok := ocs[NameExternalSecret]; ok {
		o.ExternalSecret = readExternalSecret(oc.Resource.Object)
	}
	for name, oc := range ocs {
		if role, ok := strings.CutPrefix(string(name), NameRoleSecretPrefix); ok {
			if o.RoleSecrets == nil {
				o.RoleSecrets = map[string]*ExternalSecret{}
			}
			o.RoleSecrets[role] = readExternalSecret(oc.Resource.Object)
		}
	}
	d := Compose(o)
	if f.Log != nil {
		names := make([]string, 0, len(d.Resources))
		for n := range d.Resources {
			names = append(names, n)
		}
		bphase := ""
		if o.Binding != nil {
			bphase = o.Binding.Phase
		}
		f.Log.Debug("rendered", "namespace", o.Tenant.Namespace, "name", o.Tenant.Name, "tenantPhase", o.Tenant.Phase,
			"bindingPhase", bphase, "externalSecretObserved", o.ExternalSecret != nil, "composed", names, "phase", d.Status.Phase, "ready", d.Ready)
	}

	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the desired Tenant"))
		return rsp, nil
	}
	if err := writeStatus(dxr.Resource.Object, d.Status); err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	if !d.Ready {
		dxr.Ready = resource.ReadyFalse
	}
	if err := response.SetDesiredCompositeResource(rsp, dxr); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot set the desired Tenant"))
		return rsp, nil
	}
	dcs, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the desired composed resources"))
		return rsp, nil
	}
	for name, r := range d.Resources {
		ready := resource.ReadyFalse
		if r.Ready {
			ready = resource.ReadyTrue
		}
		dcs[resource.Name(name)] = &resource.DesiredComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: r.Object}}, Ready: ready}
	}
	if err := response.SetDesiredComposedResources(rsp, dcs); err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot set the desired composed resources"))
		return rsp, nil
	}
	return rsp, nil
}

func readTenant(u map[string]any) Tenant {
	t := Tenant{
		Name:        str(u, "metadata", "name"),
		Namespace:   str(u, "metadata", "namespace"),
		UID:         str(u, "metadata", "uid"),
		InstanceRef: str(u, "spec", "instanceRef"),
		DatabaseRef: str(u, "spec", "databaseRef"),
		Database:    str(u, "spec", "database"),
		LoginRole:   str(u, "spec", "loginRole"),
		SecretName:  str(u, "spec", "credential", "secretName"),
		Phase:       str(u, "status", "phase"),
	}
	if str(u, "apiVersion") == LegacyAPIVersion {
		t.Legacy = true
		t.Name, t.Namespace = str(u, "spec", "claimRef", "name"), str(u, "spec", "claimRef", "namespace")
	}
	exts, _, _ := unstructured.NestedStringSlice(u, "spec", "extensions")
	t.Extensions = exts
	if opts, ok, _ := unstructured.NestedMap(u, "spec", "databaseOptions"); ok {
		t.DatabaseOptions = opts
	}
	roles, _, _ := unstructured.NestedSlice(u, "spec", "dataRoles")
	for _, r := range roles {
		if m, ok := r.(map[string]any); ok {
			t.DataRoles = append(t.DataRoles, DataRole{Name: str(m, "name"), Access: str(m, "access"), SecretName: str(m, "secretName")})
		}
	}
	return t
}

func readBinding(u map[string]any) *Binding {
	return &Binding{
		Phase:             str(u, "status", "atProvider", "phase"),
		Instance:          str(u, "status", "atProvider", "instance"),
		DatabaseName:      str(u, "status", "atProvider", "databaseName"),
		Database:          str(u, "status", "atProvider", "database"),
		LoginRole:         str(u, "status", "atProvider", "loginRole"),
		CredentialPath:    str(u, "status", "atProvider", "credential", "path"),
		OpenBaoURL:        str(u, "status", "atProvider", "credential", "openBaoURL"),
		CredentialVersion: num(u, "status", "atProvider", "credential", "version"),
		Conditions:        conditions(u),
		DataRoles:         bindingRoles(u),
	}
}

func bindingRoles(u map[string]any) []BindingRole {
	roles, _, _ := unstructured.NestedSlice(u, "status", "atProvider", "dataRoles")
	var out []BindingRole
	for _, r := range roles {
		if m, ok := r.(map[string]any); ok {
			ready, _, _ := unstructured.NestedBool(m, "ready")
			out = append(out, BindingRole{Name: str(m, "name"), Role: str(m, "role"), Path: str(m, "credential", "path"), Ready: ready, Version: num(m, "credential", "version")})
		}
	}
	return out
}

func readExternalSecret(u map[string]any) *ExternalSecret {
	es := &ExternalSecret{SecretName: str(u, "status", "binding", "name"), Conditions: conditions(u),
		CredentialVersion: str(u, "metadata", "annotations", AnnotationCredentialVersion)}
	if spec, ok, _ := unstructured.NestedMap(u, "spec"); ok {
		es.Spec = spec
	}
	if data, ok, _ := unstructured.NestedSlice(u, "spec", "data"); ok && len(data) > 0 {
		if m, ok := data[0].(map[string]any); ok {
			es.Key = str(m, "remoteRef", "key")
		}
	}
	if from, ok, _ := unstructured.NestedSlice(u, "spec", "dataFrom"); ok && len(from) > 0 {
		if m, ok := from[0].(map[string]any); ok {
			es.Key = or(str(m, "extract", "key"), es.Key)
		}
	}
	return es
}

func conditions(u map[string]any) []Condition {
	cs, _, _ := unstructured.NestedSlice(u, "status", "conditions")
	out := make([]Condition, 0, len(cs))
	for _, c := range cs {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		out = append(out, Condition{Type: str(m, "type"), Status: str(m, "status"), Reason: str(m, "reason"), Message: str(m, "message")})
	}
	return out
}

// writeStatus sets the Tenant's status fields this function owns; an empty
// value is left out, so the field is removed from the Tenant.
func writeStatus(u map[string]any, s Status) error {
	set := func(v string, path ...string) error {
		if v == "" {
			return nil
		}
		if err := unstructured.SetNestedField(u, v, append([]string{"status"}, path...)...); err != nil {
			return fmt.Errorf("cannot set the Tenant's status.%v: %w", path, err)
		}
		return nil
	}
	for _, f := range []struct {
		v    string
		path []string
	}{
		{s.Phase, []string{"phase"}}, {s.Instance, []string{"instance"}}, {s.Database, []string{"database"}},
		{s.LoginRole, []string{"loginRole"}}, {s.DatabaseName, []string{"databaseName"}},
		{s.OpenBaoURL, []string{"credential", "openBaoURL"}}, {s.SecretName, []string{"credential", "secretRef", "name"}},
		{s.Reason, []string{"reason"}}, {s.Message, []string{"message"}},
	} {
		if err := set(f.v, f.path...); err != nil {
			return err
		}
	}
	if len(s.DataRoles) > 0 {
		roles := make([]any, 0, len(s.DataRoles))
		for _, r := range s.DataRoles {
			m := map[string]any{"name": r.Name, "ready": r.Ready, "secretRef": map[string]any{"name": r.SecretName}}
			if r.Role != "" {
				m["role"] = r.Role
			}
			roles = append(roles, m)
		}
		if err := unstructured.SetNestedSlice(u, roles, "status", "dataRoles"); err != nil {
			return fmt.Errorf("cannot set the Tenant's status.dataRoles: %w", err)
		}
	}
	return nil
}

// num reads a whole number, as JSON (a float64) or Go (an int64) gives it.
func num(u map[string]any, path ...string) int64 {
	v, ok, _ := unstructured.NestedFieldNoCopy(u, path...)
	if !ok {
		return 0
	}
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

func str(u map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(u, path...)
	return s
}
