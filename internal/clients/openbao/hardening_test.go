package openbao

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openbao/openbao/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// recorder is a loopback server that records every connection and request
// it gets; a client that reaches it went somewhere it was not told to go.
type recorder struct {
	srv   *httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	reqs  []string // method and path only: headers could hold a token
}

func newRecorder(t *testing.T, tlsServer bool) *recorder {
	t.Helper()
	r := &recorder{}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		http.Error(w, "recorder", http.StatusInternalServerError)
	})
	r.srv = httptest.NewUnstartedServer(h)
	// Refused handshakes are the point of some tests, not news.
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	if tlsServer {
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs...)
}

var pathSeq atomic.Int64

// freshPath is a new record path under the provider's base path.
func freshPath(prefix string) string {
	return fmt.Sprintf("%s/%s/r%d", env.OpenBao.TenantBasePath, prefix, pathSeq.Add(1))
}

func rootClient(t *testing.T) *api.Client {
	t.Helper()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// hostileEnvironment sets every BAO_*/VAULT_* variable the OpenBao API
// package reads to a value that would send the client elsewhere (a
// recorder), switch off or replace TLS verification, or change what it
// sends. Standard HTTP(S)_PROXY are not set: Go never proxies loopback
// addresses, so a test here could not see them; TestTransportUsesNoProxy
// covers them.
func hostileEnvironment(t *testing.T, elsewhere *recorder, untrustedCertFile, canaryToken string) {
	t.Helper()
	for _, p := range []string{"BAO_", "VAULT_"} {
		for k, v := range map[string]string{
			"ADDR":            elsewhere.srv.URL,
			"AGENT_ADDR":      elsewhere.srv.URL,
			"HTTP_PROXY":      elsewhere.srv.URL,
			"PROXY_ADDR":      elsewhere.srv.URL,
			"SKIP_VERIFY":     "true",
			"CACERT":          untrustedCertFile,
			"CAPATH":          filepath.Dir(untrustedCertFile),
			"TLS_SERVER_NAME": "elsewhere.invalid",
			"TOKEN":           canaryToken,
			"NAMESPACE":       "hostile",
			"WRAP_TTL":        "5m",
			"SRV_LOOKUP":      "true",
			"MAX_RETRIES":     "7",
		} {
			t.Setenv(p+k, v)
		}
	}
}

// writeCert writes the recorder's self-signed certificate as a PEM file.
func writeCert(t *testing.T, r *recorder) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "untrusted", "ca.crt")
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		t.Fatal(err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// No BAO_*/VAULT_* variable changes where the client connects, what it
// trusts, or what it sends: with every one of them set to a hostile value,
// the client talks to the configured OpenBao only (nothing reaches the
// recorder the variables point to), in OpenBao's root namespace, with its
// own Kubernetes-auth token, unwrapped; and a server whose certificate the
// configured CA bundle does not sign is still refused.
func TestEnvironmentCannotRedirectOrWeakenTheClient(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	elsewhere := newRecorder(t, false)
	untrusted := newRecorder(t, true)
	untrustedCert := writeCert(t, untrusted)
	canary := testenv.RandomSecret("canary-token-")
	tf := tokenFile(t, testenv.ProviderAudience) // minted before the environment turns hostile
	hostileEnvironment(t, elsewhere, untrustedCert, canary)

	t.Run("TalksOnlyToTheConfiguredAddress", func(t *testing.T) {
		c := newClientWith(t, tf)
		p := freshPath("env")
		owner := map[string]string{"managed-by": "provider-postgresql-tenant", "database-uid": "u-env"}
		if err := c.SetOwner(ctx, p, owner); err != nil {
			t.Fatalf("SetOwner: %v", err)
		}
		data := map[string]string{"username": "app", "password": testenv.RandomSecret("pw-")}
		if _, err := c.Write(ctx, p, data, 0); err != nil {
			t.Fatalf("Write: %v", err)
		}
		rec, err := c.Read(ctx, p)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if diff := cmp.Diff(&Record{Data: data, Version: 1, Owner: owner}, rec, ignoreCreated); diff != "" {
			t.Errorf("record read back (wrapped, or from elsewhere?): -want +got:\n%s", diff)
		}
		// The record is where the configured server keeps it, in the root
		// namespace (not "hostile").
		got, err := rootClient(t).KVv2(env.OpenBao.KVMount).Get(ctx, p)
		if err != nil || got.Data["password"] != data["password"] {
			t.Errorf("the configured OpenBao does not hold the record: %v", err)
		}
		if n, reqs := elsewhere.conns.Load(), elsewhere.requests(); n != 0 || len(reqs) != 0 {
			t.Errorf("the client connected %d times to the address the environment names, requests %v", n, reqs)
		}
		if c.token == "" || c.token == canary {
			t.Error("the client does not use the token it logged in for")
		}
	})

	t.Run("VerifiesTLSWithTheCABundle", func(t *testing.T) {
		// A server whose certificate the CA bundle does not sign is refused,
		// despite SKIP_VERIFY and a CACERT that would trust it; and so it is
		// with no CA bundle (the system roots).
		for name, caBundle := range map[string]string{"CABundle": env.CA.CertFile, "SystemRoots": ""} {
			t.Run(name, func(t *testing.T) {
				c, err := New(Options{
					Address: untrusted.srv.URL, CABundleFile: caBundle, KVMount: env.OpenBao.KVMount,
					AuthMount: env.OpenBao.AuthMount, AuthRole: env.OpenBao.ProviderRole, ServiceAccountTokenFile: tf,
					Timeout: 5 * time.Second,
				})
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Read(ctx, freshPath("tls"))
				if err == nil || !strings.Contains(err.Error(), "certificate") {
					t.Errorf("Read from a server with an untrusted certificate = %v, want a certificate error", err)
				}
				if err != nil && strings.Contains(err.Error(), canary) {
					t.Error("the error shows the environment's token")
				}
				if reqs := untrusted.requests(); len(reqs) != 0 {
					t.Errorf("requests reached the untrusted server: %v", reqs)
				}
			})
		}
	})
}

// Values the API package cannot even parse do not matter either (it would
// refuse to build a client from them).
func TestMalformedEnvironmentIsIgnored(t *testing.T) {
	testenv.Need(t)
	tf := tokenFile(t, testenv.ProviderAudience)
	for k, v := range map[string]string{
		"BAO_RATE_LIMIT": "not-a-rate", "BAO_MAX_RETRIES": "-x", "BAO_CLIENT_TIMEOUT": "soon",
		"BAO_SKIP_VERIFY": "maybe", "BAO_SRV_LOOKUP": "perhaps", "BAO_DISABLE_REDIRECTS": "sometimes",
		"BAO_CLIENT_CERT": "/nonexistent/client.crt", "BAO_CLIENT_KEY": "/nonexistent/client.key",
		"BAO_CACERT_BYTES": "not a certificate",
	} {
		t.Setenv(k, v)
	}
	c := newClientWith(t, tf)
	if _, err := c.Read(context.Background(), freshPath("malformed")); err != nil {
		t.Errorf("Read: %v", err)
	}
}

// The client connects to the configured address itself, never through a
// proxy from HTTP_PROXY/HTTPS_PROXY/NO_PROXY (Go's default transport reads
// them), nor one from BAO_HTTP_PROXY/BAO_PROXY_ADDR.
func TestTransportUsesNoProxy(t *testing.T) {
	t.Setenv("BAO_PROXY_ADDR", "http://127.0.0.1:9")
	c, err := New(Options{Address: "https://openbao.example:8200", KVMount: "kv", TokenFile: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	for name, cl := range map[string]*api.Client{"login": c.anon, "requests": c.api} {
		tr, ok := cl.CloneConfig().HttpClient.Transport.(*http.Transport)
		if !ok {
			t.Fatalf("%s: transport %T", name, cl.CloneConfig().HttpClient.Transport)
		}
		if tr.Proxy != nil {
			t.Errorf("%s: the transport has a proxy function", name)
		}
		if tr.TLSClientConfig == nil || tr.TLSClientConfig.InsecureSkipVerify {
			t.Errorf("%s: the transport does not verify TLS", name)
		}
	}
}

// Only https:// addresses, unless plain http is allowed explicitly (local
// development).
func TestOnlyHTTPSUnlessAllowed(t *testing.T) {
	o := Options{Address: "http://127.0.0.1:8200", KVMount: "kv", TokenFile: "/nonexistent"}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "http://") || !strings.Contains(err.Error(), "use https://") {
		t.Errorf("New(http://) = %v, want a refusal that says to use https://", err)
	}
	for _, a := range []string{"ftp://x", "unix:///run/bao.sock", "127.0.0.1:8200", ""} {
		if _, err := New(Options{Address: a, KVMount: "kv", TokenFile: "/nonexistent"}); err == nil {
			t.Errorf("New(%q) accepted", a)
		}
	}
	o.AllowInsecureHTTP = true
	if _, err := New(o); err != nil {
		t.Errorf("New(http://) with AllowInsecureHTTP = %v", err)
	}
}

// An answer that is not OpenBao's JSON error list (a proxy, a load
// balancer, something that echoes the request) is reported by status and
// size, never by its body.
func TestForeignAnswersAreNotEchoed(t *testing.T) {
	canary := testenv.RandomSecret("echoed-")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<html>"+canary+"</html>", http.StatusBadGateway)
	}))
	defer srv.Close()
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(testenv.RandomSecret("tok-")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Address: srv.URL, AllowInsecureHTTP: true, KVMount: "kv", TokenFile: tf})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(context.Background(), "postgresql-tenants/a/b")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadGateway || !Unavailable(err) {
		t.Errorf("Read = %T (code %v), want a 502 StatusError that is Unavailable", err, se)
	}
	if err != nil && strings.Contains(err.Error(), canary) {
		t.Error("the error echoes the answer's body") // not shown: it could be anything
	}
}

// The provider logs in with a projected token whose audience is OpenBao's:
// the role (configured as docs/install.md says, audience=openbao)
// accepts a TokenRequest token with that audience and refuses the
// kube-apiserver's default-audience token of the same service account; and
// the OpenBao-audience token is refused by the kube-apiserver.
func TestLoginNeedsTheOpenBaoAudience(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	role, err := rootClient(t).Logical().ReadWithContext(ctx, "auth/"+env.OpenBao.AuthMount+"/role/"+env.OpenBao.ProviderRole)
	if err != nil || role == nil {
		t.Fatalf("read the provider role: %v", err)
	}
	if got := role.Data["audience"]; got != testenv.ProviderAudience {
		t.Errorf("the provider role's audience = %v, want %q", got, testenv.ProviderAudience)
	}

	if _, err := newClientWith(t, tokenFile(t, testenv.ProviderAudience)).Read(ctx, freshPath("aud")); err != nil {
		t.Errorf("login with the OpenBao-audience token: %v", err)
	}

	c := newClientWith(t, tokenFile(t)) // the kube-apiserver's audience
	_, err = c.Read(ctx, freshPath("aud"))
	var se *StatusError
	if err == nil || !strings.Contains(err.Error(), "login") || !errors.As(err, &se) || se.Code/100 != 4 || Unavailable(err) {
		t.Errorf("login with the default-audience token = %v, want a refused login (4xx, not Unavailable)", err)
	}
	if c.token != "" {
		t.Error("a token was issued for the default-audience token")
	}

	// The OpenBao-audience token is no credential for the kube-apiserver.
	jwt, err := os.ReadFile(tokenFile(t, testenv.ProviderAudience))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: env.Kube.Config.Host, BearerToken: string(jwt), TLSClientConfig: rest.TLSClientConfig{CAData: env.Kube.Config.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); !apierrors.IsUnauthorized(err) {
		t.Errorf("the kube-apiserver with the OpenBao-audience token: %v, want 401 Unauthorized", err)
	}
}

// An ownership write changes only the custom_metadata keys it names:
//   - two writers (two replicas in a rolling update) setting different keys
//     of one record, one after the other or at once, both keep theirs,
//     including when both create the record's metadata at the same moment;
//   - what an admin set on the record (max_versions, cas_required,
//     delete_version_after, a custom key of theirs) survives it;
//   - data writes keep their check-and-set, also under cas_required.
func TestOwnerWritesChangeOnlyTheirKeys(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	tf := tokenFile(t, testenv.ProviderAudience)
	a, b := newClientWith(t, tf), newClientWith(t, tf)
	kv := rootClient(t).KVv2(env.OpenBao.KVMount)
	base := map[string]string{"managed-by": "provider-postgresql-tenant", "database-uid": "u-1"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	both := with("role-oid", "16401")
	both["database-oid"] = "16402"

	t.Run("Interleaved", func(t *testing.T) {
		p := freshPath("meta")
		if err := a.SetOwner(ctx, p, base); err != nil {
			t.Fatal(err)
		}
		if err := a.SetOwner(ctx, p, with("role-oid", "16401")); err != nil {
			t.Fatal(err)
		}
		if err := b.SetOwner(ctx, p, with("database-oid", "16402")); err != nil {
			t.Fatal(err)
		}
		rec, err := a.Read(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(both, rec.Owner); diff != "" {
			t.Errorf("custom_metadata after two writers: -want +got:\n%s", diff)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// Both writers start on an absent path at the same moment (both
		// create), and on an existing one (both merge), many times.
		for i := 0; i < 20; i++ {
			p := freshPath("race")
			if i%2 == 1 {
				if err := a.SetOwner(ctx, p, base); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, 2)
			for j, w := range []struct {
				c     *Client
				owner map[string]string
			}{{a, with("role-oid", "16401")}, {b, with("database-oid", "16402")}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[j] = w.c.SetOwner(ctx, p, w.owner)
				}()
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			m, err := kv.GetMetadata(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(both, stringMap(m.CustomMetadata)); diff != "" {
				t.Fatalf("round %d (existing %v): custom_metadata: -want +got:\n%s", i, i%2 == 1, diff)
			}
		}
	})

	t.Run("AdminSettingsSurvive", func(t *testing.T) {
		p := freshPath("admin")
		if err := a.SetOwner(ctx, p, base); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write(ctx, p, map[string]string{"password": testenv.RandomSecret("pw-")}, 0); err != nil {
			t.Fatal(err)
		}
		// The admin keeps more versions, requires check-and-set, expires
		// old versions, and notes something, without touching the owner.
		if _, err := rootClient(t).Logical().WriteWithContext(ctx, env.OpenBao.KVMount+"/metadata/"+p, map[string]any{
			"max_versions": 7, "cas_required": true, "delete_version_after": "240h",
		}); err != nil {
			t.Fatal(err)
		}
		if err := kv.PatchMetadata(ctx, p, api.KVMetadataPatchInput{CustomMetadata: map[string]any{"note": "keep 7 versions"}}); err != nil {
			t.Fatal(err)
		}
		if err := a.SetOwner(ctx, p, with("role-oid", "16401")); err != nil {
			t.Fatal(err)
		}
		m, err := kv.GetMetadata(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if m.MaxVersions != 7 || !m.CASRequired || m.DeleteVersionAfter != 240*time.Hour || m.CurrentVersion != 1 {
			t.Errorf("after the owner write: max_versions %d cas_required %v delete_version_after %s current_version %d; want 7 true 240h0m0s 1",
				m.MaxVersions, m.CASRequired, m.DeleteVersionAfter, m.CurrentVersion)
		}
		want := with("role-oid", "16401")
		want["note"] = "keep 7 versions"
		if diff := cmp.Diff(want, stringMap(m.CustomMetadata)); diff != "" {
			t.Errorf("custom_metadata: -want +got:\n%s", diff)
		}

		// Data writes still check and set (and satisfy cas_required).
		if _, err := a.Write(ctx, p, map[string]string{"password": "x"}, 0); !errors.Is(err, ErrCASMismatch) {
			t.Errorf("Write(cas=0) on version 1 = %v, want ErrCASMismatch", err)
		}
		if v, err := a.Write(ctx, p, map[string]string{"password": "y"}, 1); err != nil || v != 2 {
			t.Errorf("Write(cas=1) = %d, %v; want version 2", v, err)
		}
	})
}
