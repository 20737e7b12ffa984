package testenv

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/openbao/openbao/api/v2"
)

var env *Env

func TestMain(m *testing.M) {
	if os.Getenv(resolvHelperEnv) != "" {
		os.Exit(resolvConfHelper())
	}
	if os.Getenv(fixedDirsHelperEnv) != "" {
		os.Exit(fixedDirsHelper())
	}
	// The matrix runs only the tests of the PostgreSQL server (the others
	// are MajorIndependent): it starts nothing else.
	o := All
	if InMatrix() {
		o = Options{Postgres: true}
	}
	Main(m, o, &env)
}

// The PostgreSQL server accepts the admin over TLS with verify-full, by IP
// and by DNS name, and the admin has CREATEDB and CREATEROLE but is no
// superuser.
func TestPostgresTLSAdmin(t *testing.T) {
	Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg := env.Postgres
	for _, host := range []string{pg.Hostaddr, pg.Host} {
		cfg, err := pg.ConnConfig(pg.AdminUser, pg.AdminPassword, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Host = host
		cfg.Fallbacks = nil
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("admin login over verify-full to %s: %v", host, err)
		}
		var ssl, super, createdb, createrole bool
		err = c.QueryRow(ctx, `SELECT s.ssl, r.rolsuper, r.rolcreatedb, r.rolcreaterole
			FROM pg_stat_ssl s, pg_roles r WHERE s.pid = pg_backend_pid() AND r.rolname = current_user`).Scan(&ssl, &super, &createdb, &createrole)
		_ = c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ssl || super || !createdb || !createrole {
			t.Errorf("host %s: ssl=%v super=%v createdb=%v createrole=%v, want true false true true", host, ssl, super, createdb, createrole)
		}
	}
}

// The server is the configured major and has contrib: the extensions
// tenants ask for most are there.
func TestPostgresMajorAndContrib(t *testing.T) {
	Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg := env.Postgres
	if major, err := PostgresMajor(); err != nil || (os.Getenv("PG_BIN") == "" && pg.Version != major) {
		t.Errorf("server major %s, configured %s (%v)", pg.Version, major, err)
	}
	t.Logf("PostgreSQL %s", pg.Version)
	su, err := pg.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(ctx) //nolint:errcheck // test connection
	var similarity float64
	var equal bool
	for _, q := range []string{"CREATE EXTENSION pg_trgm", "CREATE EXTENSION citext"} {
		if _, err := su.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := su.QueryRow(ctx, "SELECT similarity('tenant', 'tenants'), 'Tenant'::citext = 'tENANT'::citext").Scan(&similarity, &equal); err != nil || similarity <= 0 || !equal {
		t.Errorf("pg_trgm similarity %v, citext equal %v: %v", similarity, equal, err)
	}
}

// A CA that did not sign the server certificate fails verification, and a
// wrong password fails authentication: the server really checks both.
func TestPostgresRejects(t *testing.T) {
	Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg := env.Postgres

	cfg, err := pg.ConnConfig(pg.AdminUser, pg.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig.RootCAs = nil // pgx falls back to the system pool: our CA is not in it
	cfg.Fallbacks = nil
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		_ = c.Close(ctx)
		t.Error("connected without trusting the test CA")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted CA: got %v, want a certificate error", err)
	}

	cfg, err = pg.ConnConfig(pg.AdminUser, "wrong-password", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		_ = c.Close(ctx)
		t.Error("connected with a wrong password")
	} else if !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("wrong password: got %v", err)
	}
}

// The provider's service account logs in to OpenBao with Kubernetes auth,
// using a token minted by the test apiserver (TokenRequest), and gets a KV v2
// write/read/metadata-delete round trip under the tenant base path, and
// nothing outside it.
func TestOpenBaoKubernetesAuthKVRoundTrip(t *testing.T) {
	MajorIndependent(t)
	Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bao := env.OpenBao

	jwt, err := env.Kube.ServiceAccountTokenFor(ctx, ProviderNamespace, ProviderServiceAccount, ProviderAudience)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bao.Client("")
	if err != nil {
		t.Fatal(err)
	}
	login, err := c.Logical().WriteWithContext(ctx, "auth/"+bao.AuthMount+"/login", map[string]any{"role": bao.ProviderRole, "jwt": jwt})
	if err != nil {
		t.Fatalf("kubernetes auth login: %v", err)
	}
	if login == nil || login.Auth == nil || login.Auth.ClientToken == "" {
		t.Fatal("kubernetes auth login returned no token")
	}
	if got := login.Auth.Metadata["service_account_namespace"]; got != ProviderNamespace {
		t.Errorf("login metadata service_account_namespace = %q, want %q", got, ProviderNamespace)
	}
	c.SetToken(login.Auth.ClientToken)

	kv := c.KVv2(bao.KVMount)
	path := bao.TenantBasePath + "/ns1/app1"
	data := map[string]any{"username": "app1", "password": RandomSecret("pw-")}
	if _, err := kv.Put(ctx, path, data, api.WithCheckAndSet(0)); err != nil {
		t.Fatalf("first write with cas=0: %v", err)
	}
	if _, err := kv.Put(ctx, path, data, api.WithCheckAndSet(0)); err == nil || !strings.Contains(err.Error(), "check-and-set") {
		t.Errorf("second write with cas=0: got %v, want a check-and-set error", err)
	}
	if err := kv.PutMetadata(ctx, path, api.KVMetadataPutInput{CustomMetadata: map[string]any{"managed-by": "test"}}); err != nil {
		t.Fatalf("put metadata: %v", err)
	}
	got, err := kv.Get(ctx, path)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if got.Data["password"] != data["password"] || got.VersionMetadata.Version != 1 {
		t.Errorf("read back version %d with a different password", got.VersionMetadata.Version)
	}
	if got.CustomMetadata["managed-by"] != "test" {
		t.Errorf("custom_metadata = %v", got.CustomMetadata)
	}
	if err := kv.DeleteMetadata(ctx, path); err != nil {
		t.Fatalf("metadata delete: %v", err)
	}
	if _, err := kv.Get(ctx, path); !errors.Is(err, api.ErrSecretNotFound) {
		t.Errorf("after metadata delete: got %v, want ErrSecretNotFound", err)
	}
	if _, err := kv.GetVersion(ctx, path, 1); !errors.Is(err, api.ErrSecretNotFound) {
		t.Errorf("version 1 after metadata delete: got %v, want ErrSecretNotFound", err)
	}

	// The provider's policy confines it to the tenant base path.
	if _, err := kv.Put(ctx, "elsewhere/x", data); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("write outside the base path: got %v, want permission denied", err)
	}
}

// A service account other than the provider's cannot log in as the
// provider's role, even with a token of the role's audience.
func TestOpenBaoRejectsOtherServiceAccount(t *testing.T) {
	MajorIndependent(t)
	Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Kube.EnsureServiceAccount(ctx, "app-ns", "default"); err != nil {
		t.Fatal(err)
	}
	jwt, err := env.Kube.ServiceAccountTokenFor(ctx, "app-ns", "default", ProviderAudience)
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.OpenBao.Client("")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Logical().WriteWithContext(ctx, "auth/"+env.OpenBao.AuthMount+"/login", map[string]any{"role": env.OpenBao.ProviderRole, "jwt": jwt})
	if err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Errorf("login as another service account: got %v, want a not-authorized error", err)
	}
}

// A missing binary fails with the command that installs it.
func TestMissingBinaryNamesInstallCommand(t *testing.T) {
	MajorIndependent(t)
	t.Setenv("PPT_BIN", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range []Options{{Kube: true}, {OpenBao: true}} {
		e, err := Start(ctx, o)
		if err == nil {
			e.Stop()
			t.Fatalf("Start(%+v) with an empty binary directory succeeded", o)
		}
		var m *ErrMissing
		if !errors.As(err, &m) || !strings.Contains(err.Error(), "install it with `make tools") {
			t.Errorf("Start(%+v) = %v, want an ErrMissing naming make tools", o, err)
		}
	}
	// PostgreSQL: the major's npm release, with the command for that major.
	t.Setenv("PPT_CACHE", t.TempDir())
	t.Setenv("PG_BIN", "")
	t.Setenv("PG_MAJOR", "16")
	_, err := Start(ctx, Options{Postgres: true})
	var m *ErrMissing
	if !errors.As(err, &m) || !strings.Contains(err.Error(), "PostgreSQL 16 (npm release 16.") || !strings.Contains(err.Error(), "install it with `hack/install-postgres.sh 16`") {
		t.Errorf("Start with PostgreSQL 16 missing = %v, want an ErrMissing naming hack/install-postgres.sh 16", err)
	}
	t.Setenv("PG_MAJOR", "13")
	if _, err := Start(ctx, Options{Postgres: true}); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("Start with PG_MAJOR=13 = %v, want: not supported", err)
	}
}
