package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Catalog is what one catalog query tells about a tenant's database and
// login role.
type Catalog struct {
	DatabaseExists bool
	DatabaseOID    uint32
	// Owner is the database owner's role name.
	Owner string
	// PublicConnect: PUBLIC may connect (the PostgreSQL default).
	PublicConnect bool
	// RoleConnect: the login role holds CONNECT explicitly.
	RoleConnect bool

	RoleExists  bool
	RoleOID     uint32
	Login       bool
	Superuser   bool
	CreateDB    bool
	CreateRole  bool
	Replication bool
	BypassRLS   bool
	// ConnLimit is the role's connection limit (-1: none).
	ConnLimit int32
	// AdminMember: the admin role is a member of the login role, which it
	// needs to create a database owned by it and to end its sessions.
	AdminMember bool
}

// RoleAttributesOK reports whether the role has exactly the attributes the
// provider gives a tenant role: LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
// NOREPLICATION NOBYPASSRLS, and no connection limit of 0.
func (c Catalog) RoleAttributesOK() bool {
	return c.Login && !c.Superuser && !c.CreateDB && !c.CreateRole && !c.Replication && !c.BypassRLS && c.ConnLimit != 0
}

func ident(kind, name string) (string, error) {
	if err := tenancy.ValidateIdentifier(kind, name); err != nil {
		return "", &Error{Class: ClassInvalid, msg: err.Error()}
	}
	return pgx.Identifier{name}.Sanitize(), nil
}

// Observe reads the database and role in one round trip on the admin pool.
func (p *Pool) Observe(ctx context.Context, database, role string) (Catalog, error) {
	if _, _, err := dbAndRole(database, role); err != nil {
		return Catalog{}, err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var c Catalog
	var dbOID, roleOID *uint32
	var owner *string
	var publicConnect, roleConnect, login, super, createDB, createRole, repl, bypass, member *bool
	var connLimit *int32
	err := p.pool.QueryRow(ctx, qObserve, database, role).Scan(
		&dbOID, &owner, &publicConnect, &roleConnect,
		&roleOID, &login, &super, &createDB, &createRole, &repl, &bypass, &connLimit, &member)
	if err != nil {
		return Catalog{}, p.classify(err)
	}
	if dbOID != nil {
		c.DatabaseExists, c.DatabaseOID, c.Owner = true, *dbOID, deref(owner)
		c.PublicConnect, c.RoleConnect = deref(publicConnect), deref(roleConnect)
	}
	if roleOID != nil {
		c.RoleExists, c.RoleOID = true, *roleOID
		c.Login, c.Superuser, c.CreateDB, c.CreateRole = deref(login), deref(super), deref(createDB), deref(createRole)
		c.Replication, c.BypassRLS, c.ConnLimit, c.AdminMember = deref(repl), deref(bypass), deref(connLimit), deref(member)
	}
	return c, nil
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// AvailableExtensions returns which of names the server can install
// (pg_available_extensions). A failed query is an error, never "not
// available".
func (p *Pool) AvailableExtensions(ctx context.Context, names []string) (map[string]bool, error) {
	for _, n := range names {
		if _, err := ident("extension", n); err != nil {
			return nil, err
		}
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	rows, err := p.pool.Query(ctx, qAvailableExtensions, names)
	if err != nil {
		return nil, p.classify(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, p.classify(err)
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = false
	}
	for _, n := range got {
		out[n] = true
	}
	return out, nil
}

// CreateRole creates the tenant login role with the attributes the provider
// always gives it and a SCRAM-SHA-256 verifier (never a password), then
// makes the admin a member, as CREATE DATABASE ... OWNER needs.
func (p *Pool) CreateRole(ctx context.Context, role, verifier string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	if !scram.IsVerifier(verifier) {
		return errors.New("refusing to send a role password that is not a SCRAM-SHA-256 verifier")
	}
	if err := p.exec(ctx, fmt.Sprintf(qCreateRole, r, verifier)); err != nil {
		return err
	}
	return p.GrantRoleToAdmin(ctx, role)
}

// GrantRoleToAdmin makes the admin a member of role.
func (p *Pool) GrantRoleToAdmin(ctx context.Context, role string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qGrantRoleToAdmin, r))
}

// RepairRole resets the attributes a non-superuser admin may change (LOGIN,
// NOCREATEDB, NOCREATEROLE, no connection limit). It never touches the
// password. A role made SUPERUSER, REPLICATION or BYPASSRLS by someone else
// needs a superuser to repair: callers report that drift instead.
func (p *Pool) RepairRole(ctx context.Context, role string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qRepairRole, r))
}

// dbAndRole validates and quotes a database and a role name.
func dbAndRole(database, role string) (string, string, error) {
	d, err := ident("database", database)
	if err != nil {
		return "", "", err
	}
	r, err := ident("role", role)
	return d, r, err
}

// CreateDatabase creates database owned by owner.
func (p *Pool) CreateDatabase(ctx context.Context, database, owner string) error {
	d, o, err := dbAndRole(database, owner)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qCreateDatabase, d, o))
}

// SetDatabaseOwner gives database to owner.
func (p *Pool) SetDatabaseOwner(ctx context.Context, database, owner string) error {
	d, o, err := dbAndRole(database, owner)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qAlterDatabaseOwner, d, o))
}

// RestrictConnect revokes CONNECT and TEMPORARY from PUBLIC and grants
// CONNECT to role, in one transaction.
func (p *Pool) RestrictConnect(ctx context.Context, database, role string) error {
	d, r, err := dbAndRole(database, role)
	if err != nil {
		return err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(qRevokePublic, d)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(qGrantConnect, d, r))
		return err
	})
	return p.classify(err)
}

// BlockLogins makes role NOLOGIN with CONNECTION LIMIT 0, so no new session
// can start (used before a drop).
func (p *Pool) BlockLogins(ctx context.Context, role string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qBlockLogins, r))
}

// TerminateSessions ends every session connected to database and returns
// how many were signalled.
func (p *Pool) TerminateSessions(ctx context.Context, database string) (int, error) {
	if _, err := ident("database", database); err != nil {
		return 0, err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var n int
	err := p.pool.QueryRow(ctx, qTerminate, database).Scan(&n)
	return n, p.classify(err)
}

// DropDatabase drops database, ending its sessions (WITH (FORCE)). Absent is
// success.
func (p *Pool) DropDatabase(ctx context.Context, database string) error {
	d, err := ident("database", database)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qDropDatabase, d))
}

// DropRole drops role. Absent is success.
func (p *Pool) DropRole(ctx context.Context, role string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qDropRole, r))
}

func (p *Pool) exec(ctx context.Context, sql string) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	_, err := p.pool.Exec(ctx, sql)
	return p.classify(err)
}

// TenantConn is one connection as a tenant's own role to its own database,
// over the config's TLS rules. It is not pooled: it exists to prove the
// credential logs in and to act inside the tenant database.
type TenantConn struct {
	conn   *pgx.Conn
	redact []string
	call   func(context.Context) (context.Context, context.CancelFunc)
}

// ConnectAs opens one connection as cred to database on the pool's server.
func (p *Pool) ConnectAs(ctx context.Context, database string, cred Credential) (*TenantConn, error) {
	if _, _, err := dbAndRole(database, cred.Username); err != nil {
		return nil, err
	}
	cfg := p.pool.Config().ConnConfig.Copy()
	cfg.Database = database
	cfg.User = cred.Username
	cfg.Password = cred.Password
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	redact := append([]string{cred.Username, cred.Password}, p.redact...)
	if err != nil {
		return nil, Classify(err, redact...)
	}
	return &TenantConn{conn: c, redact: redact, call: p.withTimeout}, nil
}

// Extensions returns the extensions installed in the database, sorted.
func (t *TenantConn) Extensions(ctx context.Context) ([]string, error) {
	ctx, cancel := t.call(ctx)
	defer cancel()
	rows, err := t.conn.Query(ctx, qExtensions)
	if err != nil {
		return nil, Classify(err, t.redact...)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, Classify(err, t.redact...)
	}
	sort.Strings(names)
	return names, nil
}

// CreateExtension installs an extension (IF NOT EXISTS) as the connected
// role. Trusted extensions may be installed by the database owner.
func (t *TenantConn) CreateExtension(ctx context.Context, name string) error {
	e, err := ident("extension", name)
	if err != nil {
		return err
	}
	ctx, cancel := t.call(ctx)
	defer cancel()
	if _, err := t.conn.Exec(ctx, fmt.Sprintf(qCreateExtension, e)); err != nil {
		return Classify(err, t.redact...)
	}
	return nil
}

// Close closes the connection.
func (t *TenantConn) Close(ctx context.Context) error { return t.conn.Close(ctx) }
