package openbao

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/openbao/openbao/api/v2"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// These tests run against a real OpenBao server with TLS, logging in with
// Kubernetes auth using tokens minted by a real kube-apiserver.

var env *testenv.Env

// ignoreCreated leaves a version's creation time (the server's clock) out
// of a comparison of records; TestRecordLifecycle checks it on its own.
var ignoreCreated = cmpopts.IgnoreFields(Record{}, "Created")

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{Kube: true, OpenBao: true}, &env) }

// tokenFile writes a TokenRequest token of the provider's service account
// with the given audiences (none: the kube-apiserver's) to a file, as a
// projected volume would.
func tokenFile(t *testing.T, audiences ...string) string {
	t.Helper()
	jwt, err := env.Kube.ServiceAccountTokenFor(context.Background(), testenv.ProviderNamespace, testenv.ProviderServiceAccount, audiences...)
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(jwt), 0o600); err != nil {
		t.Fatal(err)
	}
	return tf
}

// newClient is the provider's client: OpenBao's audience on its token.
func newClient(t *testing.T) *Client {
	t.Helper()
	return newClientWith(t, tokenFile(t, testenv.ProviderAudience))
}

func newClientWith(t *testing.T, tf string) *Client {
	t.Helper()
	c, err := New(Options{
		Address:                 env.OpenBao.Address,
		CABundleFile:            env.CA.CertFile,
		AuthMount:               env.OpenBao.AuthMount,
		AuthRole:                env.OpenBao.ProviderRole,
		ServiceAccountTokenFile: tf,
		KVMount:                 env.OpenBao.KVMount,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var seq int

func path() string {
	seq++
	return env.OpenBao.TenantBasePath + "/ns/db" + string(rune('a'+seq)) //nolint:gosec // seq counts a test's few paths
}

func TestRecordLifecycle(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := newClient(t)
	p := path()

	rec, err := c.Read(ctx, p)
	if err != nil || rec != nil {
		t.Fatalf("Read(absent) = %+v, %v; want nil, nil", rec, err)
	}

	// An interrupted create leaves metadata only: it reads as version 0,
	// no data, with its owner.
	owner := map[string]string{"managed-by": "provider-postgresql-tenant", "database-uid": "u-1"}
	if err := c.SetOwner(ctx, p, owner); err != nil {
		t.Fatal(err)
	}
	rec, err = c.Read(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Record{Version: 0, Owner: owner}, rec, ignoreCreated); diff != "" {
		t.Errorf("metadata-only record: -want +got:\n%s", diff)
	}

	data := map[string]string{"username": "app", "password": testenv.RandomSecret("pw-")}
	v, err := c.Write(ctx, p, data, 0)
	if err != nil || v != 1 {
		t.Fatalf("Write(cas=0) = %d, %v; want version 1", v, err)
	}
	// A second first write loses and writes nothing.
	if _, err := c.Write(ctx, p, map[string]string{"password": "other"}, 0); !errors.Is(err, ErrCASMismatch) {
		t.Errorf("second Write(cas=0) = %v, want ErrCASMismatch", err)
	}
	rec, err = c.Read(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Record{Data: data, Version: 1, Owner: owner}, rec, ignoreCreated); diff != "" {
		t.Errorf("record after first write: -want +got:\n%s", diff)
	}
	// Created is the time of the version read: a credential's age.
	if rec != nil && (rec.Created.IsZero() || time.Since(rec.Created) > time.Minute) {
		t.Errorf("the version just written was created at %v", rec.Created)
	}

	// Restoring an altered record replaces exactly the version read.
	if _, err := c.Write(ctx, p, data, 0); !errors.Is(err, ErrCASMismatch) {
		t.Errorf("stale cas: %v", err)
	}
	if v, err := c.Write(ctx, p, data, 1); err != nil || v != 2 {
		t.Errorf("Write(cas=1) = %d, %v; want version 2", v, err)
	}

	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	if rec, err := c.Read(ctx, p); err != nil || rec != nil {
		t.Errorf("after Delete: %+v, %v; want nothing at all", rec, err)
	}
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.KVv2(env.OpenBao.KVMount).GetVersion(ctx, p, 1); err == nil {
		t.Error("version 1 survived Delete")
	}
}

func TestPathsAreValidatedBeforeAnyCall(t *testing.T) {
	testenv.Need(t)
	c := newClient(t)
	for _, p := range []string{"", "/abs", "a/../b", "data/x", "a//b"} {
		if _, err := c.Read(context.Background(), p); err == nil || !strings.Contains(err.Error(), "credential path") {
			t.Errorf("Read(%q) = %v, want a path error", p, err)
		}
	}
	if c.token != "" {
		t.Error("an invalid path caused a login")
	}
}

func TestPolicyConfinesToTheBasePath(t *testing.T) {
	testenv.Need(t)
	c := newClient(t)
	_, err := c.Write(context.Background(), "other/place", map[string]string{"a": "b"}, 0)
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("write outside the base path = %v, want 403", err)
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 403 || Unavailable(err) {
		t.Errorf("a refusal must be a StatusError 403 and not Unavailable: %#v", err)
	}
	// No answer at all is Unavailable.
	down, err2 := New(Options{Address: "https://127.0.0.1:1", KVMount: "kv", TokenFile: "/nonexistent", Timeout: time.Second})
	if err2 != nil {
		t.Fatal(err2)
	}
	down.token = "x"
	if _, err := down.Read(context.Background(), "postgresql-tenants/a/b"); !Unavailable(err) {
		t.Errorf("unreachable OpenBao: %v, want Unavailable", err)
	}
}

func TestTokenRenewalAndRelogin(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := newClient(t)
	if _, err := c.Read(ctx, path()); err != nil {
		t.Fatal(err)
	}
	first := c.token
	if first == "" || c.expiry.IsZero() || !c.renew {
		t.Fatalf("after login: token set %v, expiry %v, renewable %v", first != "", c.expiry, c.renew)
	}

	// Near expiry, the same token is renewed.
	c.expiry = time.Now().Add(30 * time.Second)
	if _, err := c.Read(ctx, path()); err != nil {
		t.Fatal(err)
	}
	if c.token != first || time.Until(c.expiry) < 30*time.Minute {
		t.Errorf("not renewed: same token %v, expires in %s", c.token == first, time.Until(c.expiry))
	}

	// A revoked token is replaced by a fresh login on the next call.
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Auth().Token().RevokeTreeWithContext(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, path()); err != nil {
		t.Fatalf("after revocation: %v", err)
	}
	if c.token == first {
		t.Error("still using the revoked token")
	}
}

func TestConsumerURL(t *testing.T) {
	got := ConsumerURL("https://bao.example:8200/", "kv", "postgresql-tenants/ns/app")
	if want := "https://bao.example:8200/v1/kv/data/postgresql-tenants/ns/app"; got != want {
		t.Errorf("ConsumerURL() = %q, want %q", got, want)
	}
}

// A policy without "patch" on the metadata path refuses the ownership
// write, and the error says which capability the provider's policy lacks.
func TestOwnershipWithoutPatchSaysWhatThePolicyLacks(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	noPatch := strings.ReplaceAll(env.OpenBao.ProviderPolicy(), `"patch", `, "")
	if noPatch == env.OpenBao.ProviderPolicy() {
		t.Fatal("the provider policy grants no patch to remove")
	}
	if err := root.Sys().PutPolicyWithContext(ctx, "provider-without-patch", noPatch); err != nil {
		t.Fatal(err)
	}
	tok, err := root.Auth().Token().CreateWithContext(ctx, &api.TokenCreateRequest{Policies: []string{"provider-without-patch"}, TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(tok.Auth.ClientToken), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Address: env.OpenBao.Address, CABundleFile: env.CA.CertFile, TokenFile: tf, KVMount: env.OpenBao.KVMount})
	if err != nil {
		t.Fatal(err)
	}
	p := path()
	if _, err := c.Write(ctx, p, map[string]string{"password": "x"}, 0); err != nil {
		t.Fatal(err)
	}
	err = c.SetOwner(ctx, p, map[string]string{"owner": "a"})
	if err == nil || !strings.Contains(err.Error(), `must grant "patch"`) || !strings.Contains(err.Error(), "403") {
		t.Errorf("SetOwner without patch = %v, want a 403 naming the missing \"patch\"", err)
	}
}
