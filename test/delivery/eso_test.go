package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/function"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// shippedExternalSecretSpec is the spec of the ExternalSecret the Tenant's
// composition function composes for a Ready binding whose copy is at path,
// with the Secret named secret and the Compositions' input.
func shippedExternalSecretSpec(t *testing.T, path, secret string) map[string]any {
	t.Helper()
	d := function.Compose(function.Observed{
		Input:  function.Input{SecretStore: "openbao-tenants", RefreshInterval: "1h"},
		Tenant: function.Tenant{Name: "shipped", Namespace: "shipped", UID: "u", InstanceRef: "pg", SecretName: secret},
		Binding: &function.Binding{Phase: function.PhaseReady, CredentialPath: path,
			Conditions: []function.Condition{{Type: "Ready", Status: "True"}}},
	})
	es, ok := d.Resources[function.NameExternalSecret]
	if !ok {
		t.Fatal("the function composed no ExternalSecret for a Ready binding")
	}
	spec, _, _ := unstructured.NestedMap(es.Object, "spec")
	return spec
}

// perKeySpec is the form that names each key with its own remote
// reference: ESO reads the record once per key.
func perKeySpec(path, secret string) map[string]any {
	var data []any
	for _, k := range tenancy.CredentialKeys {
		data = append(data, map[string]any{"secretKey": k, "remoteRef": map[string]any{"key": path, "property": k}})
	}
	return map[string]any{
		"refreshInterval": "1h",
		"secretStoreRef":  map[string]any{"kind": "ClusterSecretStore", "name": store},
		"target":          map[string]any{"name": secret, "creationPolicy": "Owner", "deletionPolicy": "Retain"},
		"data":            data,
	}
}

// esSync is one ExternalSecret kept in sync by the real ESO.
type esSync struct {
	ns, name string
	syncs    int
	last     string
}

// create makes the ExternalSecret and waits for its first sync.
func (s *esSync) create(ctx context.Context, t *testing.T, spec map[string]any) {
	t.Helper()
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": s.name, "namespace": s.ns},
		"spec":     spec,
	}}
	if err := env.Kube.Client.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	s.wait(ctx, t)
}

// refresh has ESO sync again (a changed annotation is a new version of the
// ExternalSecret to ESO) and waits until it has.
func (s *esSync) refresh(ctx context.Context, t *testing.T) {
	t.Helper()
	// ESO writes it too (its status): the edit is made again on a conflict.
	testenv.Edit(t, env.Kube.Client, tenantkit.Ref("external-secrets.io/v1", "ExternalSecret", s.ns, s.name), func(es *unstructured.Unstructured) {
		a := es.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["force-sync"] = fmt.Sprint(s.syncs)
		es.SetAnnotations(a)
	})
	s.wait(ctx, t)
}

// wait waits until ESO reports a sync newer than the last one seen.
func (s *esSync) wait(ctx context.Context, t *testing.T) {
	t.Helper()
	for {
		es := &unstructured.Unstructured{}
		es.SetAPIVersion("external-secrets.io/v1")
		es.SetKind("ExternalSecret")
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, es); err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedString(es.Object, "status", "syncedResourceVersion")
		st, msg := esReady(s.ns, s.name)
		if v != "" && v != s.last && st == "True" {
			s.last = v
			s.syncs++
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("ExternalSecret %s/%s not synced: Ready=%s %s; ESO log:\n%s", s.ns, s.name, st, msg, testenv.Tail(env.ESO.LogFile(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// secretData is the Secret's data as strings.
func secretData(ctx context.Context, t *testing.T, ns, name string) map[string]string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// keysOf lists a map's keys, sorted: what a failure may print of a Secret.
func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// OpenBao requests per sync, counted from the audit device.
type baoCost struct{ Reads, Logins, Lookups, Revocations, Other int }

func baoCosts(t *testing.T, ns string) (baoCost, []string) {
	t.Helper()
	entries, err := env.OpenBao.AuditEntries()
	if err != nil {
		t.Fatal(err)
	}
	var c baoCost
	var other []string
	for _, e := range entries {
		if e.ServiceAccountNamespace != ns {
			continue
		}
		switch {
		case e.Operation == "read" && strings.HasPrefix(e.Path, env.OpenBao.KVMount+"/data/"):
			c.Reads++
		case e.Path == "auth/"+env.OpenBao.AuthMount+"/login":
			c.Logins++
		case e.Path == "auth/token/lookup-self":
			c.Lookups++
		case e.Path == "auth/token/revoke-self":
			c.Revocations++
		default:
			c.Other++
			other = append(other, e.Operation+" "+e.Path)
		}
	}
	return c, other
}

// TestExternalSecretReadsOnceAndProjectsSevenKeys: the ExternalSecret the
// Tenant's Composition ships, run by the real ESO against the real
// OpenBao, reads the delivery copy once per sync and projects exactly the
// seven keys, with the same values as the per-key form, even when the
// record has gained fields: a field the provider might add and one planted
// by whoever can write the path reach neither Secret. OpenBao's audit
// device counts the requests of each namespace.
func TestExternalSecretReadsOnceAndProjectsSevenKeys(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	record := map[string]any{
		"username": "orders", "password": "not-a-real-password-7f3a", "database": "orders",
		"host": "db.example.test", "hostaddr": "192.0.2.10", "port": "5432", "sslmode": "verify-full",
	}
	want := map[string]string{}
	for k, v := range record {
		want[k] = v.(string)
	}
	// The extra fields: one shaped like ownership metadata, one planted,
	// and one whose name is no Secret key (ESO converts such a name before
	// templating; it must neither fail the sync nor reach the Secret).
	record["managed-by"] = "provider-postgresql-tenant"
	record["planted"] = "PGOPTIONS=-c search_path=evil"
	record["planted key/1"] = map[string]any{"nested": true}

	const shipped, perKey = "eso-shipped", "eso-perkey"
	const syncs = 3
	got := map[string]baoCost{}
	for ns, form := range map[string]func(path, secret string) map[string]any{
		shipped: func(path, secret string) map[string]any { return shippedExternalSecretSpec(t, path, secret) },
		perKey:  perKeySpec,
	} {
		if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
			t.Fatal(err)
		}
		path := tenancy.DeliveryPath(env.OpenBao.TenantBasePath, ns, "orders")
		if _, err := root.KVv2(env.OpenBao.KVMount).Put(ctx, path, record); err != nil {
			t.Fatal(err)
		}
		s := &esSync{ns: ns, name: "orders-postgresql"}
		s.create(ctx, t, form(path, s.name))
		for s.syncs < syncs {
			s.refresh(ctx, t)
		}
		data := secretData(ctx, t, ns, s.name)
		if diff := cmp.Diff(keysOf(want), keysOf(data)); diff != "" {
			t.Errorf("%s: Secret keys -want +got:\n%s", ns, diff)
		}
		for k, v := range want {
			if data[k] != v {
				t.Errorf("%s: Secret key %s is not the record's value", ns, k)
			}
		}
		// ESO revokes a sync's token after it has reported the sync: give
		// the last revocation a moment to reach the audit log.
		c, other := baoCosts(t, ns)
		for end := time.Now().Add(15 * time.Second); c.Revocations < c.Logins && time.Now().Before(end); {
			time.Sleep(200 * time.Millisecond)
			c, other = baoCosts(t, ns)
		}
		got[ns] = c
		t.Logf("%s: %d syncs seen, %d logins: %d kv reads, %d token lookups, %d token revocations, %d other requests %v",
			ns, s.syncs, c.Logins, c.Reads, c.Lookups, c.Revocations, c.Other, other)
	}
	// Without ESO's token cache every sync logs in once (ESO may sync once
	// more than the status shows, when it writes the Secret before its
	// cache has it), looks its token up and revokes it: a sync is a login.
	// The shipped form reads the record once per sync, the per-key form
	// once per key.
	for ns, reads := range map[string]int{shipped: 1, perKey: len(tenancy.CredentialKeys)} {
		c := got[ns]
		if c.Logins < syncs || c.Revocations != c.Logins || c.Lookups != c.Logins || c.Other != 0 {
			t.Errorf("%s: %+v for at least %d syncs, want a login, a token lookup and a revocation per sync and nothing else", ns, c, syncs)
		}
		if c.Reads != reads*c.Logins {
			t.Errorf("%s: %d kv reads in %d syncs, want %d per sync", ns, c.Reads, c.Logins, reads)
		}
	}

	// An existing Tenant's ExternalSecret, moved from the per-key form to
	// the shipped one (as a new Composition revision applies it), keeps
	// its Secret: the same seven keys with the same values.
	before := secretData(ctx, t, perKey, "orders-postgresql")
	// ESO writes it too (its status): the edit is made again on a conflict.
	es := tenantkit.Ref("external-secrets.io/v1", "ExternalSecret", perKey, "orders-postgresql")
	testenv.Edit(t, env.Kube.Client, es, func(es *unstructured.Unstructured) {
		es.Object["spec"] = shippedExternalSecretSpec(t, tenancy.DeliveryPath(env.OpenBao.TenantBasePath, perKey, "orders"), "orders-postgresql")
	})
	synced, _, _ := unstructured.NestedString(es.Object, "status", "syncedResourceVersion")
	(&esSync{ns: perKey, name: "orders-postgresql", last: synced}).wait(ctx, t)
	after := secretData(ctx, t, perKey, "orders-postgresql")
	if diff := cmp.Diff(keysOf(before), keysOf(after)); diff != "" {
		t.Errorf("the Secret's keys changed with the form: -before +after:\n%s", diff)
	}
	for k := range before {
		if before[k] != after[k] {
			t.Errorf("the Secret's %s changed with the form", k)
		}
	}
}
