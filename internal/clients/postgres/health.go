package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// The PostgreSQL majors the provider supports (and is tested on).
const (
	MinMajor = 14
	MaxMajor = 18
)

// Health is what a health check learned about a server and the admin role.
type Health struct {
	// Version is the server_version, without a packager's suffix.
	Version string
	// Major is the server's major version, e.g. 17.
	Major      int
	Superuser  bool
	CreateDB   bool
	CreateRole bool
	// Inherit: the admin role's INHERIT attribute.
	Inherit bool
	// SearchPath is the admin session's search_path as the server sees it.
	SearchPath string
	// SelfGrant (16 and later): on a role the admin creates, it can obtain
	// the SET and INHERIT membership provisioning needs; probed in a
	// transaction that is rolled back. Always true before 16.
	SelfGrant bool
	// SelfGrantProblem says why the probe failed, when it did.
	SelfGrantProblem string
}

// errPreflightRollback ends the probe transaction without committing.
var errPreflightRollback = errors.New("preflight: roll back")

// Check runs the health check: a TLS connection per the config's sslMode
// (reused from the pool when one is idle), authentication, the server
// version, the admin role's attributes and the session's search_path in one
// query; on PostgreSQL 16 and later, and only once per pool while it
// passes, a probe of the memberships the admin can obtain, in a transaction
// that is rolled back (nothing persists).
func (p *Pool) Check(ctx context.Context) (Health, error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var h Health
	var num int32
	err := p.pool.QueryRow(ctx, qHealth).Scan(&h.Version, &num, &h.Superuser, &h.CreateDB, &h.CreateRole, &h.Inherit, &h.SearchPath)
	if err != nil {
		return h, p.classify(err)
	}
	// server_version may carry a packager's suffix: "15.18 (Debian 15.18-0+deb12u1)".
	if f := strings.Fields(h.Version); len(f) > 0 {
		h.Version = f[0]
	}
	h.Major = int(num / 10000)
	p.major.Store(int64(h.Major))
	if err := Supported(h.Version, h.Major); err != nil {
		return h, err
	}
	if h.SearchPath != SafeSearchPath {
		// Something between the provider and the server (a connection
		// pooler that drops startup parameters, say) did not keep the
		// pinned search_path: refuse to run anything on such sessions.
		return h, &Error{Class: ClassInvalid, msg: fmt.Sprintf("the admin session's search_path is %q, not the pinned %q: a connection pooler between the provider and the server may be dropping startup parameters; connect the provider to the server directly (or to a pooler in session mode that keeps them)", h.SearchPath, SafeSearchPath)}
	}
	h.SelfGrant = true
	versionPoint("Health.SelfGrant")
	if h.Major >= 16 && !h.Superuser && !p.selfGrantOK.Load() {
		h.SelfGrant, h.SelfGrantProblem, err = p.probeSelfGrant(ctx)
		if err != nil {
			return h, err
		}
		p.selfGrantOK.Store(h.SelfGrant)
	}
	return h, nil
}

// probeSelfGrant creates a NOLOGIN role, grants it to the admin WITH
// INHERIT TRUE, SET TRUE and reads the result, then rolls everything back.
func (p *Pool) probeSelfGrant(ctx context.Context) (bool, string, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := qProbeRole + "_" + hex.EncodeToString(rnd[:])
	r := pgx.Identifier{name}.Sanitize()
	var ok bool
	var problem string
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(qCreateProbeRole, r)); err != nil {
			problem = "CREATE ROLE failed: " + p.classify(err).Error()
			return errPreflightRollback
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(qGrantRoleToAdmin16, r)); err != nil {
			problem = "GRANT <new role> TO CURRENT_USER WITH INHERIT TRUE, SET TRUE failed: " + p.classify(err).Error()
			return errPreflightRollback
		}
		if err := tx.QueryRow(ctx, qProbeMembership16, name).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			problem = "after GRANT <new role> TO CURRENT_USER WITH INHERIT TRUE, SET TRUE the admin still cannot use the role's privileges and SET ROLE to it"
		}
		return errPreflightRollback
	})
	if err != nil && !errors.Is(err, errPreflightRollback) {
		return false, "", p.classify(err)
	}
	return ok && problem == "", problem, nil
}

// Supported returns nil when the major version is supported, else an
// UnsupportedVersion error naming the supported range.
func Supported(version string, major int) error {
	versionPoint("Supported")
	if major < MinMajor {
		return &Error{Class: ClassUnsupported, msg: fmt.Sprintf("PostgreSQL %s is not supported: this provider supports PostgreSQL %d to %d", version, MinMajor, MaxMajor)}
	}
	return nil
}

// Privileges returns nil when the role has every privilege provisioning
// needs on this server's major version, or a ClassPrivileges error naming
// what is missing and what to grant. A superuser passes.
func (h Health) Privileges() error {
	if h.Superuser {
		return nil
	}
	var missing []string
	if !h.CreateDB {
		missing = append(missing, "CREATEDB")
	}
	if !h.CreateRole {
		missing = append(missing, "CREATEROLE")
	}
	versionPoint("Health.Privileges")
	if !h.Inherit && h.Major < 16 {
		// Before 16, the admin uses a tenant role's privileges (to change
		// CONNECT, end sessions and drop its database) only through
		// INHERIT; from 16 on each grant carries its own INHERIT option.
		missing = append(missing, "INHERIT")
	}
	if len(missing) > 0 {
		return &Error{Class: ClassPrivileges, msg: fmt.Sprintf("the admin role lacks %s: as a superuser (or the managed service's admin), run ALTER ROLE <the admin role> %s", strings.Join(missing, ", "), strings.Join(missing, " "))}
	}
	if !h.SelfGrant {
		return &Error{Class: ClassPrivileges, msg: fmt.Sprintf("on PostgreSQL %d the admin role must be able to make itself a member, WITH INHERIT TRUE and SET TRUE, of the roles it creates: %s", h.Major, h.SelfGrantProblem)}
	}
	return nil
}

// Warning returns a note for a server newer than the tested majors, or "".
func (h Health) Warning() string {
	versionPoint("Health.Warning")
	if h.Major > MaxMajor {
		return fmt.Sprintf("PostgreSQL %d is newer than the majors this provider is tested on (%d to %d)", h.Major, MinMajor, MaxMajor)
	}
	return ""
}

// SystemIdentifier returns the cluster's system identifier (pg_control_system),
// or "" when the admin may not read it (a managed service may revoke
// EXECUTE on pg_control_system from PUBLIC; nothing else a non-superuser can
// read identifies the data directory, so the identity is then left empty
// rather than guessed). The identifier is shared by every server made from a
// copy of the same data directory (a restored backup, a replica): it tells
// servers of different initdb runs apart, not copies of one.
func (p *Pool) SystemIdentifier(ctx context.Context) (string, error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var may bool
	if err := p.pool.QueryRow(ctx, qMayReadSystemIdentifier).Scan(&may); err != nil {
		return "", p.classify(err)
	}
	if !may {
		return "", nil
	}
	var id string
	if err := p.pool.QueryRow(ctx, qSystemIdentifier).Scan(&id); err != nil {
		return "", p.classify(err)
	}
	return id, nil
}

// templatesRecheck is how long template1's schemas, once found safe, are
// not looked at again: seeing them takes a session on template1 (which,
// while it lasts, makes a CREATE DATABASE copying template1 fail), and
// the health check runs every minute. The template0 and template1
// privileges in pg_database are read at every check; an unsafe state is
// looked at again at every check, so a fix is seen at once.
const templatesRecheck = time.Hour

// Templates reads what decides whether a tenant could plant objects in the
// databases new databases are copied from (tenancy.TemplateProblem): does
// template0 accept connections; may PUBLIC connect to template1 and create
// schemas there; and, only when it may connect, in which of template1's
// schemas PUBLIC may create objects (which takes a session on template1:
// opened only then, for one query, and not again for templatesRecheck
// while the answer is none). It also reads who may connect to postgres and
// template1 (tenancy.ConnectWarning), at every check.
func (p *Pool) Templates(ctx context.Context) (tenancy.TemplateState, error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var s tenancy.TemplateState
	if err := p.pool.QueryRow(ctx, qTemplates).Scan(&s.Template0AllowConn, &s.Template1PublicConnect, &s.Template1PublicCreate); err != nil {
		return s, p.classify(err)
	}
	rows, err := p.pool.Query(ctx, qDefaultConnect)
	if err != nil {
		return s, p.classify(err)
	}
	if s.DefaultConnect, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (tenancy.DatabaseConnect, error) {
		var d tenancy.DatabaseConnect
		err := r.Scan(&d.Database, &d.Public, &d.AdminOwn, &d.AdminSessions)
		return d, err
	}); err != nil {
		return s, p.classify(err)
	}
	if !s.Template1PublicConnect {
		return s, nil
	}
	if t := p.templatesChecked.Load(); t != 0 && time.Since(time.Unix(0, t)) < templatesRecheck {
		return s, nil
	}
	major, err := p.Major(ctx)
	if err != nil {
		return s, err
	}
	c, err := pgx.ConnectConfig(ctx, p.configOn("template1", major, SafeSearchPath))
	if err != nil {
		e := Classify(err, p.redact...)
		return s, &Error{Class: e.Class, SQLState: e.SQLState, msg: fmt.Sprintf("PUBLIC may connect to template1, and seeing whether it may also create objects there takes a session on template1, which failed: %v; let the admin role connect to template1, or, as a superuser, run REVOKE CONNECT ON DATABASE template1 FROM PUBLIC", e)}
	}
	defer c.Close(ctx) //nolint:errcheck // a read-only session
	rows, err = c.Query(ctx, qPublicCreateSchemas)
	if err != nil {
		return s, p.classify(err)
	}
	if s.Template1CreateSchemas, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return s, p.classify(err)
	}
	if len(s.Template1CreateSchemas) == 0 {
		p.templatesChecked.Store(time.Now().UnixNano())
	} else {
		p.templatesChecked.Store(0)
	}
	return s, nil
}
