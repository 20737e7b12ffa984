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
	"strconv"
	"syscall"
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
	// CA signed the server certificate.
	CA *CA
	// Version is the server's major version, e.g. "15".
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

// PostgresBinDir returns the directory holding postgres and initdb:
// $PG_BIN, or Debian's PostgreSQL 15.
func PostgresBinDir() string {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d
	}
	return "/usr/lib/postgresql/15/bin"
}

func startPostgres(ctx context.Context, root string, ca *CA) (*Postgres, error) {
	bin := PostgresBinDir()
	for _, b := range []string{"postgres", "initdb"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, missing("PostgreSQL "+b, filepath.Join(bin, b), "make tools (hack/install-postgres.sh)")
		}
	}
	port, err := FreePort()
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
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.runAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The parent directories must be traversable by that user.
		for d := root; ; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, fi.Mode().Perm()|0o711)
			}
			if d == filepath.Dir(d) || d == os.TempDir() {
				break
			}
		}
	}
	kp, err := ca.issue(p.dir, "server", []string{p.Host}, []net.IP{net.ParseIP(p.Hostaddr)})
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
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", p.dataDir, "-U", p.SuperUser,
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
`, p.Hostaddr, p.Port, p.dir, kp.CertFile, kp.KeyFile)
	if err := appendFile(filepath.Join(p.dataDir, "postgresql.conf"), conf); err != nil {
		return nil, err
	}
	hba := "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(p.dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return nil, err
	}
	if err := p.chown(p.dir); err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	if err := p.bootstrap(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Start starts the server (again) and waits until it accepts TLS logins.
func (p *Postgres) Start(ctx context.Context) error {
	if p.proc != nil && !p.proc.exited() {
		return nil
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.dataDir)
	cmd.SysProcAttr = p.sysProcAttr()
	proc, err := startProcess("postgres", p.logFile, cmd)
	if err != nil {
		return err
	}
	p.proc = proc
	err = waitFor(ctx, 60*time.Second, func(ctx context.Context) error {
		if proc.exited() {
			return errors.New("postgres exited")
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

func (p *Postgres) bootstrap(ctx context.Context) error {
	if err := p.CreateRole(ctx, p.AdminUser, p.AdminPassword, "NOSUPERUSER CREATEDB CREATEROLE"); err != nil {
		return fmt.Errorf("cannot create the admin role: %w", err)
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
		return os.Lchown(path, int(p.runAs.Uid), int(p.runAs.Gid))
	})
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close() //nolint:errcheck // already failing
		return err
	}
	return f.Close()
}
