// Package postgres is the provider's only door to PostgreSQL: pooled admin
// connections per registered server, TLS with libpq's sslmode meanings,
// failure classification, and (the only place with) SQL text.
package postgres

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/apimachinery/pkg/types"
)

// ApplicationName identifies the provider's sessions in pg_stat_activity.
const ApplicationName = "provider-postgresql-tenant"

// RequireAuth is the only authentication method the provider answers with
// a password (libpq's require_auth).
const RequireAuth = "scram-sha-256"

// Target is where a pool connects: the server of one config.
type Target struct {
	Host     string
	Hostaddr string
	Port     int
	Database string
	SSLMode  SSLMode
}

// Credential is a role and its password.
type Credential struct {
	Username string
	Password string
}

// Options bound every pool and every call.
type Options struct {
	// MaxConns bounds each config's pool.
	MaxConns int32
	// ConnectTimeout bounds establishing one connection, TLS included.
	ConnectTimeout time.Duration
	// CallTimeout bounds every call made through a pool when the caller's
	// context has no earlier deadline.
	CallTimeout time.Duration
	// CABundleFile is the PEM file of trusted CAs (--ca-bundle). It is read
	// on every Get, so a rotated bundle takes effect without a restart.
	CABundleFile string
	// Hook, when set, is called inside multi-statement transactions between
	// statements, with a name for the point; an error aborts the
	// transaction. It exists for fault-injection tests.
	Hook func(point string) error
}

// DefaultOptions are the defaults of the provider's flags.
var DefaultOptions = Options{MaxConns: 4, ConnectTimeout: 10 * time.Second, CallTimeout: 30 * time.Second}

// Manager holds one pool per config, shared by every Database of that
// config, and replaces it when the config's UID, target, effective
// credential or CA bundle changes.
type Manager struct {
	opts Options

	mu    sync.Mutex
	pools map[string]*Pool

	// closed counts pools closed because they were replaced or removed.
	closed int
}

// NewManager returns an empty pool manager.
func NewManager(o Options) *Manager {
	if o.MaxConns < 1 {
		o.MaxConns = DefaultOptions.MaxConns
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultOptions.ConnectTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultOptions.CallTimeout
	}
	return &Manager{opts: o, pools: map[string]*Pool{}}
}

// Pool is the admin connection pool of one config.
type Pool struct {
	// Ref names the config (kind/namespace/name).
	Ref string
	// UID of the config the pool was built for.
	UID types.UID

	key    string
	target Target
	pool   *pgxpool.Pool
	redact []string
	call   time.Duration
	faults func(string) error
	// major is the server's major version once a connection has told it
	// (0: not yet known).
	major atomic.Int64
	// verifier is whether the admin may read pg_authid (0: not asked yet,
	// 1: no, 2: yes).
	verifier atomic.Int32
	// selfGrantOK: the 16+ membership probe passed on this pool.
	selfGrantOK atomic.Bool
	// locale is template0's locale, once read (see databaseLocale).
	locale atomic.Pointer[Locale]
	// templatesChecked is when template1's schemas were last found safe
	// (UnixNano; 0: not yet, or they were not).
	templatesChecked atomic.Int64
	// tenantConns is the last reading of TenantConnections.
	tenantConns atomic.Pointer[tenantConnsReading]
}

// tenantConnsReading is one reading of TenantConnections.
type tenantConnsReading struct {
	available int32
	at        time.Time
}

// tenantConnsFresh is how long a reading of TenantConnections is used:
// max_connections and the reserved slots change only with a restart of
// the server.
const tenantConnsFresh = 5 * time.Minute

// Get returns the pool for a config, building it (lazily: no connection is
// opened here) when there is none or when anything that identifies it has
// changed. A replaced pool is closed once its in-flight calls finish.
// rebuilt reports whether a new pool was made.
func (m *Manager) Get(ref string, uid types.UID, t Target, c Credential) (p *Pool, rebuilt bool, err error) {
	ca, err := m.readCA()
	if err != nil {
		return nil, false, err
	}
	key := poolKey(uid, t, c, ca)

	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.pools[ref]; ok && old.key == key {
		return old, false, nil
	}
	np, err := m.newPool(ref, uid, key, t, c, ca)
	if err != nil {
		return nil, false, err
	}
	if old, ok := m.pools[ref]; ok {
		m.closeLocked(old)
	}
	m.pools[ref] = np
	return np, true, nil
}

// Lookup returns the current pool of a config if it exists and was built for
// uid. It never builds one: only the config controller, which validates the
// server, does.
func (m *Manager) Lookup(ref string, uid types.UID) (*Pool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pools[ref]
	if !ok || p.UID != uid {
		return nil, false
	}
	return p, true
}

// Remove closes and forgets the pool of a config.
func (m *Manager) Remove(ref string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pools[ref]; ok {
		m.closeLocked(p)
		delete(m.pools, ref)
	}
}

// Close closes every pool.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ref, p := range m.pools {
		m.closeLocked(p)
		delete(m.pools, ref)
	}
}

// Closed returns how many pools were closed after being replaced or removed.
func (m *Manager) Closed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Manager) closeLocked(p *Pool) {
	m.closed++
	// pgxpool.Close waits for acquired connections to be released.
	go p.pool.Close()
}

func (m *Manager) readCA() ([]byte, error) {
	if m.opts.CABundleFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(m.opts.CABundleFile)
	if err != nil {
		return nil, &Error{Class: ClassInvalid, msg: fmt.Sprintf("cannot read the CA bundle --ca-bundle=%s: %v", m.opts.CABundleFile, err)}
	}
	return b, nil
}

func (m *Manager) newPool(ref string, uid types.UID, key string, t Target, c Credential, ca []byte) (*Pool, error) {
	roots, err := ParseCABundle(ca)
	if err != nil {
		return nil, &Error{Class: ClassInvalid, msg: fmt.Sprintf("--ca-bundle=%s: %v", m.opts.CABundleFile, err)}
	}
	tlsCfg, err := TLSConfig(t.SSLMode, t.Host, t.Hostaddr, roots)
	if err != nil {
		return nil, &Error{Class: ClassInvalid, msg: err.Error()}
	}
	cfg, err := adminConfig(t, c, tlsCfg, m.opts.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = m.opts.MaxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, Classify(err, c.Username, c.Password)
	}
	return &Pool{Ref: ref, UID: uid, key: key, target: t, pool: pool, redact: []string{c.Username, c.Password}, call: m.opts.CallTimeout, faults: m.opts.Hook}, nil
}

// serviceName is the one service of the service file adminConfig hands
// pgx: it has no settings.
const serviceName = "provider-postgresql-tenant"

// adminConfig is the pool configuration of one config's server. pgx merges
// the PG* environment variables (PGHOST, PGOPTIONS, PGTZ, PGAPPNAME,
// PGTARGETSESSIONATTRS, PGSSL*, PGSERVICE, ...), the service file PGSERVICE
// names and files under $HOME (~/.pgpass, ~/.postgresql/root.crt) into
// what it parses; none of them may change where, how, as whom or with which
// session settings the provider connects, nor make the parse fail. So the
// connection string names every key an environment variable could set, the
// service is an empty one read from a pipe of this process (a service named
// in the environment is never looked up), and every field pgx derives is
// then set again to the provider's own value: the runtime parameters are
// exactly application_name and search_path, with no fallback, no
// validation or set-up callback, no Kerberos names and no client
// certificate. ConnectAs and the template1 session copy this
// configuration, so they connect the same way. The password is set on the
// config, never placed in a connection string.
func adminConfig(t Target, c Credential, tlsCfg *tls.Config, connectTimeout time.Duration) (*pgxpool.Config, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, &Error{Class: ClassInvalid, msg: fmt.Sprintf("cannot make the empty service file: %v", err)}
	}
	defer r.Close() //nolint:errcheck // read-only end
	_, err = w.WriteString("[" + serviceName + "]\n")
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, &Error{Class: ClassInvalid, msg: fmt.Sprintf("cannot write the empty service file: %v", err)}
	}
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf(
		"host=%s port=%d dbname=%s user=%s passfile='' application_name=%s connect_timeout=%d"+
			" sslmode=disable sslnegotiation=postgres sslcertmode=disable sslcert='' sslkey='' sslrootcert='' sslpassword='' sslsni=1"+
			" target_session_attrs=any min_protocol_version=3.0 max_protocol_version=3.0 channel_binding=prefer require_auth=%s"+
			" service=%s servicefile=%s",
		quote(dialHost(t)), t.Port, quote(t.Database), quote(c.Username), ApplicationName, int(connectTimeout.Seconds()),
		RequireAuth, serviceName, quote(fmt.Sprintf("/dev/fd/%d", r.Fd()))))
	if err != nil {
		return nil, &Error{Class: ClassInvalid, msg: "invalid connection parameters"}
	}
	cc := cfg.ConnConfig
	cc.Host = dialHost(t)
	cc.Port = uint16(t.Port) //nolint:gosec // a port is validated to 1-65535 before it reaches here
	cc.Database = t.Database
	cc.User = c.Username
	cc.Password = c.Password
	cc.TLSConfig = tlsCfg
	cc.Fallbacks = nil
	cc.SSLNegotiation = ""
	cc.SSLCertMode = "disable"
	cc.KerberosSrvName = ""
	cc.KerberosSpn = ""
	cc.ValidateConnect = nil
	cc.AfterConnect = nil
	cc.AfterNetConnect = nil
	cc.OAuthTokenProvider = nil
	cc.MinProtocolVersion = "3.0"
	cc.MaxProtocolVersion = "3.0"
	cc.ChannelBinding = "prefer"
	// A password only ever answers a SCRAM-SHA-256 challenge: a server (or
	// anything in its place) that asks for it in clear text or as MD5, or
	// lets the session in without authentication, is refused before the
	// password leaves the process.
	cc.RequireAuth = RequireAuth
	// No object a tenant can create is ever resolved by an admin session:
	// the search_path names only the system catalog (pg_temp last, so it
	// can never shadow it). Startup parameters win over per-role and
	// per-database settings, so these are also the only session settings
	// the provider sends (no options, no TimeZone). The other settings of
	// the admin's own database and role are the platform admin's, not a
	// tenant's: only the search_path is pinned here; every session on
	// another database pins the rest too (PinnedSettings).
	cc.RuntimeParams = map[string]string{"application_name": ApplicationName, "search_path": SafeSearchPath}
	cc.ConnectTimeout = connectTimeout
	cc.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	cc.StatementCacheCapacity = 512
	cc.DescriptionCacheCapacity = 512
	cfg.MinConns = 0
	cfg.MinIdleConns = 0
	cfg.MaxConnIdleTime = 30 * time.Minute
	cfg.MaxConnLifetime = 2 * time.Hour
	cfg.MaxConnLifetimeJitter = 10 * time.Minute
	cfg.HealthCheckPeriod = time.Minute
	return cfg, nil
}

// dialHost is what the provider dials: hostaddr when set (no DNS lookup),
// else host.
func dialHost(t Target) string {
	if t.Hostaddr != "" {
		return t.Hostaddr
	}
	return t.Host
}

// quote makes a libpq key/value connection-string value.
func quote(s string) string {
	r := []rune{'\''}
	for _, c := range s {
		if c == '\'' || c == '\\' {
			r = append(r, '\\')
		}
		r = append(r, c)
	}
	return string(append(r, '\''))
}

// poolKey identifies a pool: a change of any input gives another key. The
// credential is hashed, never kept in clear outside the pgx config.
func poolKey(uid types.UID, t Target, c Credential, ca []byte) string {
	h := sha256.New()
	for _, s := range []string{string(uid), t.Host, t.Hostaddr, strconv.Itoa(t.Port), t.Database, string(t.SSLMode), c.Username, c.Password} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(ca)
	return hex.EncodeToString(h.Sum(nil))
}

// Target returns where the pool connects.
func (p *Pool) Target() Target { return p.target }

// Stats of a pool, for tests and benchmarks.
type Stats struct {
	// NewConns is how many connections the pool has opened in its life.
	NewConns int64
	// TotalConns is how many it holds now.
	TotalConns int32
}

// Stats returns the pool's connection counters.
func (p *Pool) Stats() Stats {
	s := p.pool.Stat()
	return Stats{NewConns: s.NewConnsCount(), TotalConns: s.TotalConns()}
}

// withTimeout bounds a call by the pool's call timeout unless ctx ends
// earlier.
func (p *Pool) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.call)
}

// hook calls the fault-injection hook, if any.
func (p *Pool) hook(point string) error {
	if p.faults == nil {
		return nil
	}
	return p.faults(point)
}

// classify classifies err with this pool's credential redacted.
func (p *Pool) classify(err error) error {
	if err == nil {
		return nil
	}
	return Classify(err, p.redact...)
}

// Major returns the server's major version (e.g. 17), read from the
// server_version a connection reports at startup, without a query.
func (p *Pool) Major(ctx context.Context) (int, error) {
	if m := p.major.Load(); m != 0 {
		return int(m), nil
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return 0, p.classify(err)
	}
	v := c.Conn().PgConn().ParameterStatus("server_version")
	c.Release()
	m, ok := ParseMajor(v)
	if !ok {
		return 0, &Error{Class: ClassUnavailable, msg: fmt.Sprintf("cannot read the server's major version from server_version %q", v)}
	}
	p.major.Store(int64(m))
	return m, nil
}

// ParseMajor returns the major version of a server_version such as "17.10",
// "15.18 (Debian 15.18-0+deb12u1)" or "18beta1".
func ParseMajor(v string) (int, bool) {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	m, err := strconv.Atoi(v[:i])
	if err != nil || m <= 0 {
		return 0, false
	}
	return m, true
}
