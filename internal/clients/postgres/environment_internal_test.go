package postgres

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// HostilePGEnvironment sets every variable pgx reads (and a HOME with a
// ~/.pgpass and ~/.postgresql files) to values that would send the provider
// to host:port as someone else, with other session settings, without TLS,
// or make parsing fail, including PGSERVICE naming a service of a
// PGSERVICEFILE that points elsewhere. It returns the password it planted.
func HostilePGEnvironment(t *testing.T, host string, port int) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	planted := "planted-password-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	p := strconv.Itoa(port)
	services := write("pg_service.conf", "[elsewhere]\nhost="+host+"\nport="+p+"\ndbname=elsewhere\nuser=intruder\npassword="+planted+
		"\nsslmode=disable\noptions=-c search_path=evil\napplication_name=evil-service\nkrbsrvname=evil\ndefault_query_exec_mode=simple_protocol"+
		"\nstatement_cache_capacity=0\npool_max_conns=100\nstatement_timeout=1\ntarget_session_attrs=standby\n")
	home := filepath.Join(dir, "home")
	write("home/.pgpass", "*:*:*:*:"+planted+"\n")
	write("home/.pg_service.conf", "[provider-postgresql-tenant]\nhost="+host+"\noptions=-c search_path=evil\n")
	write("home/.postgresql/root.crt", "not a certificate\n")
	for k, v := range map[string]string{
		"HOME":                 home,
		"PGHOST":               host,
		"PGHOSTADDR":           host,
		"PGPORT":               p,
		"PGDATABASE":           "elsewhere",
		"PGUSER":               "intruder",
		"PGPASSWORD":           planted,
		"PGPASSFILE":           filepath.Join(home, ".pgpass"),
		"PGAPPNAME":            "evil-app",
		"PGCONNECT_TIMEOUT":    "soon",
		"PGSSLMODE":            "disable",
		"PGSSLKEY":             "/nonexistent/client.key",
		"PGSSLCERT":            "/nonexistent/client.crt",
		"PGSSLCERTMODE":        "require",
		"PGSSLSNI":             "0",
		"PGSSLROOTCERT":        "/nonexistent/root.crt",
		"PGSSLPASSWORD":        planted,
		"PGSSLNEGOTIATION":     "direct",
		"PGTARGETSESSIONATTRS": "standby",
		"PGSERVICE":            "elsewhere",
		"PGSERVICEFILE":        services,
		"PGTZ":                 "Pacific/Chatham",
		"PGOPTIONS":            "-c search_path=evil -c statement_timeout=1",
		"PGMINPROTOCOLVERSION": "3.2",
		"PGMAXPROTOCOLVERSION": "latest",
		"PGCHANNELBINDING":     "require",
		"PGREQUIREAUTH":        "password",
		"PGKRBSRVNAME":         "evil",
		"PGGSSENCMODE":         "require",
		"PGCLIENTENCODING":     "LATIN1",
		"PGDATESTYLE":          "SQL, DMY",
	} {
		t.Setenv(k, v)
	}
	return planted
}

// Session is what a session reports about itself.
type Session struct {
	SearchPath, TimeZone, ApplicationName, StatementTimeout, ClientEncoding, DateStyle string
	User, Database                                                                     string
	Port                                                                               int
	SSL                                                                                bool
}

const qSessionForTest = `SELECT current_setting('search_path'), current_setting('TimeZone'), current_setting('application_name'),
  current_setting('statement_timeout'), current_setting('client_encoding'), current_setting('DateStyle'),
  current_user::text, current_database()::text, inet_server_port(), (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())`

func scanSession(r pgx.Row) (Session, error) {
	var s Session
	err := r.Scan(&s.SearchPath, &s.TimeZone, &s.ApplicationName, &s.StatementTimeout, &s.ClientEncoding, &s.DateStyle, &s.User, &s.Database, &s.Port, &s.SSL)
	return s, err
}

// SessionForTest reports an admin session of the pool.
func (p *Pool) SessionForTest(ctx context.Context) (Session, error) {
	return scanSession(p.pool.QueryRow(ctx, qSessionForTest))
}

// SessionForTest reports the tenant session.
func (t *TenantConn) SessionForTest(ctx context.Context) (Session, error) {
	return scanSession(t.conn.QueryRow(ctx, qSessionForTest))
}

// The parsed configuration is the provider's own, field by field, whatever
// the environment, the service file it names and $HOME hold.
func TestAdminConfigIgnoresTheEnvironment(t *testing.T) {
	planted := HostilePGEnvironment(t, "192.0.2.1", 5999)
	// A service the file does not hold, and a service file that does not
	// exist, would fail the parse.
	for name, set := range map[string]map[string]string{
		"ServiceElsewhere": {},
		"UnknownService":   {"PGSERVICE": "nowhere"},
		"NoServiceFile":    {"PGSERVICEFILE": "/nonexistent/pg_service.conf"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range set {
				t.Setenv(k, v)
			}
			checkAdminConfig(t, planted)
		})
	}
}

func checkAdminConfig(t *testing.T, planted string) {
	tlsCfg := &tls.Config{ServerName: "db.example.org", MinVersion: tls.VersionTLS12}
	cfg, err := adminConfig(Target{Host: "db.example.org", Hostaddr: "10.1.2.3", Port: 5433, Database: "postgres", SSLMode: SSLVerifyFull},
		Credential{Username: "admin", Password: "pw"}, tlsCfg, 7*time.Second)
	if err != nil {
		t.Fatalf("adminConfig in a hostile environment: %v", err)
	}
	type view struct {
		Host, Database, User, Password                  string
		Port                                            uint16
		TLS                                             bool
		Fallbacks                                       int
		RuntimeParams                                   map[string]string
		SSLNegotiation, KerberosSrvName, KerberosSpn    string
		ValidateConnect, AfterConnect, AfterNetConnect  bool
		RequireAuth, ChannelBinding, MinProto, MaxProto string
		ConnectTimeout                                  time.Duration
		ExecMode                                        pgx.QueryExecMode
		StatementCache, DescriptionCache                int
		MaxConns                                        int32
	}
	cc := cfg.ConnConfig
	got := view{
		Host: cc.Host, Database: cc.Database, User: cc.User, Password: cc.Password, Port: cc.Port,
		TLS: cc.TLSConfig == tlsCfg, Fallbacks: len(cc.Fallbacks), RuntimeParams: cc.RuntimeParams,
		SSLNegotiation: cc.SSLNegotiation, KerberosSrvName: cc.KerberosSrvName, KerberosSpn: cc.KerberosSpn,
		ValidateConnect: cc.ValidateConnect != nil, AfterConnect: cc.AfterConnect != nil, AfterNetConnect: cc.AfterNetConnect != nil,
		RequireAuth: cc.RequireAuth, ChannelBinding: cc.ChannelBinding, MinProto: cc.MinProtocolVersion, MaxProto: cc.MaxProtocolVersion,
		ConnectTimeout: cc.ConnectTimeout, ExecMode: cc.DefaultQueryExecMode,
		StatementCache: cc.StatementCacheCapacity, DescriptionCache: cc.DescriptionCacheCapacity, MaxConns: cfg.MaxConns,
	}
	want := view{
		Host: "10.1.2.3", Database: "postgres", User: "admin", Password: "pw", Port: 5433,
		TLS: true, RuntimeParams: map[string]string{"application_name": ApplicationName, "search_path": SafeSearchPath},
		RequireAuth: RequireAuth, ChannelBinding: "prefer", MinProto: "3.0", MaxProto: "3.0",
		ConnectTimeout: 7 * time.Second, ExecMode: pgx.QueryExecModeCacheStatement, StatementCache: 512, DescriptionCache: 512,
		MaxConns: got.MaxConns, // set by the Manager
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admin config in a hostile environment: -want +got:\n%s", diff)
	}
	if got.Password == planted {
		t.Error("the config carries the planted password")
	}
}
