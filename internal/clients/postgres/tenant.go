package postgres

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	// AllowConn: the database accepts connections (datallowconn). A tenant
	// database accepts none until its CONNECT is restricted.
	AllowConn bool
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
	// Inherit: the role uses the privileges of the roles it is a member of
	// (before 16, the only say; from 16 on, each grant's INHERIT option).
	Inherit bool
	// AdminMember: the admin role holds the membership in the login role
	// that provisioning needs: it can SET ROLE to it (CREATE DATABASE ...
	// OWNER) and use its privileges (CONNECT grants, ending its sessions,
	// DROP DATABASE). From PostgreSQL 16 on, a bare membership (such as the
	// automatic ADMIN-only one of a role's creator) is not enough.
	AdminMember bool
	// AdminCanAdmin: the admin may grant, alter and drop the login role
	// (before 16: CREATEROLE and the role is no superuser; from 16 on, also
	// ADMIN OPTION on it).
	AdminCanAdmin bool
	// ValidUntil is the role's password expiry as the server prints it
	// ("": none).
	ValidUntil string
	// VerifierDigest is a digest of the role's password verifier, when the
	// admin may read pg_authid (a superuser); "" otherwise. It changes
	// whenever the role's password is set.
	VerifierDigest string

	// OtherGrants are the privileges on the database of roles other than
	// PUBLIC, its owner, the login role and the admin.
	OtherGrants []tenancy.DatabaseGrant
	// OtherMembers are the members of the login role other than the admin.
	OtherMembers []tenancy.RoleMembership

	// RoleSettings and DatabaseSettings are the login role's defaults
	// ("name=value") in every database and in its own database.
	RoleSettings, DatabaseSettings []string

	// IsTemplate: the database is marked as a template (datistemplate).
	IsTemplate bool
	// DatabaseConnLimit is the database's own connection limit (-1: none).
	DatabaseConnLimit int32
}

// LoginFingerprint is everything the catalog shows that decides whether
// the role's credential still logs in to its database: the objects'
// identities, the role's attributes and expiry, the CONNECT privileges,
// the owner and, where the admin may read it, the password verifier. A
// login proven under one fingerprint is assumed to still work while the
// fingerprint is unchanged.
func (c Catalog) LoginFingerprint() string {
	return fmt.Sprintf("db=%t/%d/%s/%t/%t/%t/%t/%d role=%t/%d/%t/%t/%t/%t/%t/%t/%d/%q verifier=%s",
		c.DatabaseExists, c.DatabaseOID, c.Owner, c.AllowConn, c.PublicConnect, c.RoleConnect, c.IsTemplate, c.DatabaseConnLimit,
		c.RoleExists, c.RoleOID, c.Login, c.Superuser, c.CreateDB, c.CreateRole, c.Replication, c.BypassRLS, c.ConnLimit, c.ValidUntil,
		c.VerifierDigest)
}

// RoleAttributesOK reports whether the role has exactly the attributes the
// provider gives a tenant role: LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
// NOREPLICATION NOBYPASSRLS. The connection limit is one of the role's
// limits (RoleLimits), not an attribute reset here.
func (c Catalog) RoleAttributesOK() bool {
	return c.Login && c.GroupAttributesOK()
}

// GroupAttributesOK reports whether the role has the attributes of a data
// role's role, which holds privileges for its login members: NOSUPERUSER
// NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS, whatever LOGIN.
func (c Catalog) GroupAttributesOK() bool {
	return !c.Superuser && !c.CreateDB && !c.CreateRole && !c.Replication && !c.BypassRLS
}

// RoleLimits is what the catalog shows of the role's limits.
func (c Catalog) RoleLimits() tenancy.RoleLimitsState {
	return tenancy.RoleLimitsState{ConnLimit: c.ConnLimit, RoleSettings: c.RoleSettings, DatabaseSettings: c.DatabaseSettings}
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
	var allowConn, publicConnect, roleConnect, login, super, createDB, createRole, repl, bypass, member, canAdmin, inherit *bool
	var connLimit *int32
	var validUntil *string
	var verifier []byte
	major, err := p.Major(ctx)
	if err != nil {
		return Catalog{}, err
	}
	readable, err := p.verifierReadable(ctx)
	if err != nil {
		return Catalog{}, err
	}
	var granted *bool
	var otherGrants, otherMembers []byte
	var roleSettings, dbSettings []string
	var isTemplate *bool
	var dbConnLimit *int32
	err = p.onCurrentSession(ctx, func(c *pgxpool.Conn) (bool, error) {
		err := c.Conn().QueryRow(ctx, qObserve(major, readable), database, role).Scan(
			&dbOID, &owner, &allowConn, &publicConnect, &roleConnect,
			&roleOID, &login, &super, &createDB, &createRole, &repl, &bypass, &connLimit, &inherit, &member, &canAdmin,
			&validUntil, &verifier, &granted, &otherGrants, &otherMembers, &roleSettings, &dbSettings,
			&isTemplate, &dbConnLimit)
		return err == nil && outdatedMemberships(member, granted), err
	})
	if err != nil {
		return Catalog{}, err
	}
	if err := unmarshalIfAny(otherGrants, &c.OtherGrants); err != nil {
		return Catalog{}, err
	}
	if err := unmarshalIfAny(otherMembers, &c.OtherMembers); err != nil {
		return Catalog{}, err
	}
	if dbOID != nil {
		c.DatabaseExists, c.DatabaseOID, c.Owner, c.AllowConn = true, *dbOID, deref(owner), deref(allowConn)
		c.PublicConnect, c.RoleConnect = deref(publicConnect), deref(roleConnect)
		c.IsTemplate, c.DatabaseConnLimit = deref(isTemplate), deref(dbConnLimit)
	}
	if roleOID != nil {
		c.RoleExists, c.RoleOID = true, *roleOID
		c.Login, c.Superuser, c.CreateDB, c.CreateRole = deref(login), deref(super), deref(createDB), deref(createRole)
		c.Replication, c.BypassRLS, c.ConnLimit, c.AdminMember = deref(repl), deref(bypass), deref(connLimit), deref(member)
		c.AdminCanAdmin, c.ValidUntil, c.Inherit = deref(canAdmin), deref(validUntil), deref(inherit)
		if len(verifier) > 0 {
			c.VerifierDigest = hex.EncodeToString(verifier)
		}
		c.RoleSettings, c.DatabaseSettings = roleSettings, dbSettings
	}
	return c, nil
}

// verifierReadable reports whether the admin may read pg_authid, asked
// once per pool.
func (p *Pool) verifierReadable(ctx context.Context) (bool, error) {
	switch p.verifier.Load() {
	case 1:
		return false, nil
	case 2:
		return true, nil
	}
	var ok bool
	if err := p.pool.QueryRow(ctx, qVerifierReadable).Scan(&ok); err != nil {
		return false, p.classify(err)
	}
	v := int32(1)
	if ok {
		v = 2
	}
	p.verifier.Store(v)
	return ok, nil
}

// unmarshalIfAny decodes a JSON column of the catalog query; NULL leaves
// v as it is.
func unmarshalIfAny(b []byte, v any) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("cannot read the catalog's list of other access: %w", err)
	}
	return nil
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// Extension is what the server says about one requested extension.
type Extension struct {
	// Available: pg_available_extensions lists it.
	Available bool
	// OwnerMayCreate: its default version is trusted or needs no superuser,
	// so the database owner (never a superuser) can create it.
	OwnerMayCreate bool
	// Requires lists the extensions it needs installed first.
	Requires []string
	// NotAllowed: a managed service's allow-list exists and lacks it.
	NotAllowed bool
}

// Extensions returns, for each of names, whether the server can install it
// and whether the tenant's role may (pg_available_extensions, the
// extension's trusted/superuser flags, and a managed service's allow-list
// where the server has one). A failed query is an error, never "not
// available".
func (p *Pool) Extensions(ctx context.Context, names []string) (map[string]Extension, error) {
	for _, n := range names {
		if _, err := ident("extension", n); err != nil {
			return nil, err
		}
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	out := make(map[string]Extension, len(names))
	for _, n := range names {
		out[n] = Extension{}
	}
	rows, err := p.pool.Query(ctx, qAvailableExtensions, names)
	if err != nil {
		return nil, p.classify(err)
	}
	var name string
	var mayCreate bool
	var requires []string
	var rds, azure *string
	_, err = pgx.ForEachRow(rows, []any{&name, &mayCreate, &requires, &rds, &azure}, func() error {
		out[name] = Extension{Available: true, OwnerMayCreate: mayCreate, Requires: slices.Clone(requires),
			NotAllowed: !allowListed(rds, name, true) || !allowListed(azure, name, false)}
		return nil
	})
	if err != nil {
		return nil, p.classify(err)
	}
	return out, nil
}

// allowListed reads a comma-separated allow-list setting: nil (the setting
// does not exist) allows everything; so do "*" and, when emptyAll, "".
func allowListed(list *string, name string, emptyAll bool) bool {
	if list == nil {
		return true
	}
	l := strings.TrimSpace(*list)
	if l == "*" || (l == "" && emptyAll) {
		return true
	}
	for _, e := range strings.Split(l, ",") {
		if strings.TrimSpace(e) == name {
			return true
		}
	}
	return false
}

// CreateRole creates the tenant login role with the attributes the provider
// always gives it and a SCRAM-SHA-256 verifier (never a password), and makes
// the admin a member with what provisioning needs (GrantRoleToAdmin), in
// one transaction: a role never exists without that membership.
func (p *Pool) CreateRole(ctx context.Context, role, verifier string) error {
	return p.CreateRoleWithLimits(ctx, role, verifier, tenancy.EffectiveLimits{})
}

// CreateRoleWithLimits is CreateRole with the role's limits set in the same
// transaction: a role never exists without its connection limit and
// session defaults.
func (p *Pool) CreateRoleWithLimits(ctx context.Context, role, verifier string, l tenancy.EffectiveLimits) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	if !scram.IsVerifier(verifier) {
		return errors.New("refusing to send a role password that is not a SCRAM-SHA-256 verifier")
	}
	grant, err := p.grantToAdmin(ctx, r)
	if err != nil {
		return err
	}
	create := fmt.Sprintf(qCreateRole, r, verifier)
	if l.ConnectionLimit != nil {
		create += fmt.Sprintf(qCreateRoleConnectionLimit, *l.ConnectionLimit)
	}
	settings, err := setSettings(r, l.Settings)
	if err != nil {
		return err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, create); err != nil {
			return err
		}
		for _, s := range settings {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		if err := p.hook("between CREATE ROLE and GRANT"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, grant)
		return err
	})
	return p.classify(err)
}

// GrantRoleToAdmin makes the admin a member of role, from PostgreSQL 16 on
// explicitly WITH INHERIT TRUE, SET TRUE (the automatic grant a role's
// creator gets has neither).
func (p *Pool) GrantRoleToAdmin(ctx context.Context, role string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	grant, err := p.grantToAdmin(ctx, r)
	if err != nil {
		return err
	}
	return p.exec(ctx, grant)
}

func (p *Pool) grantToAdmin(ctx context.Context, quotedRole string) (string, error) {
	major, err := p.Major(ctx)
	if err != nil {
		return "", err
	}
	versionPoint("grantToAdmin")
	if major >= 16 {
		return fmt.Sprintf(qGrantRoleToAdmin16, quotedRole), nil
	}
	return fmt.Sprintf(qGrantRoleToAdmin, quotedRole), nil
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

// SetRolePassword replaces role's password with a SCRAM-SHA-256 verifier
// (never a password). It needs what altering the role needs: CREATEROLE,
// and from PostgreSQL 16 on ADMIN OPTION on the role.
func (p *Pool) SetRolePassword(ctx context.Context, role, verifier string) error {
	r, err := ident("role", role)
	if err != nil {
		return err
	}
	if !scram.IsVerifier(verifier) {
		return errors.New("refusing to send a role password that is not a SCRAM-SHA-256 verifier")
	}
	return p.exec(ctx, fmt.Sprintf(qSetRolePassword, r, verifier))
}

// SetRolePasswordEndingSessions replaces role's password with a SCRAM-SHA-256
// verifier and ends every other session of the role, in one transaction,
// and returns how many sessions were signalled. A session of the role
// that sets its own password meanwhile waits for this transaction and is
// ended while it waits, so that it cannot put its own password back
// between the two steps. It needs what SetRolePassword and
// TerminateRoleSessions need.
func (p *Pool) SetRolePasswordEndingSessions(ctx context.Context, role, verifier string) (int, error) {
	r, err := ident("role", role)
	if err != nil {
		return 0, err
	}
	if !scram.IsVerifier(verifier) {
		return 0, errors.New("refusing to send a role password that is not a SCRAM-SHA-256 verifier")
	}
	return p.alterEndingSessions(ctx, role, fmt.Sprintf(qSetRolePassword, r, verifier))
}

// alterEndingSessions runs alter (an ALTER ROLE of role) and ends every
// other session of role in one transaction, as a member of role, and
// returns how many sessions were signalled.
func (p *Pool) alterEndingSessions(ctx context.Context, role, alter string) (int, error) {
	var n int
	err := p.asMember(ctx, role, func(ctx context.Context, c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, alter); err != nil {
				return err
			}
			return tx.QueryRow(ctx, qTerminateRole, role).Scan(&n)
		})
	})
	return n, err
}

// RepairDatabase gives database, which owner owns, back the attributes of
// a tenant database: not a template, no connection limit of its own.
func (p *Pool) RepairDatabase(ctx context.Context, database, owner string) error {
	d, _, err := dbAndRole(database, owner)
	if err != nil {
		return err
	}
	return p.asMember(ctx, owner, execOn(fmt.Sprintf(qRepairDatabase, d)))
}

// TerminateRoleSessions ends every session of role except the calling one
// and returns how many were signalled, once each has exited (up to 5 s
// each). It needs the privileges of role
// (membership with INHERIT) or of pg_signal_backend; without them the
// server refuses (class InsufficientPrivileges).
func (p *Pool) TerminateRoleSessions(ctx context.Context, role string) (int, error) {
	if _, err := ident("role", role); err != nil {
		return 0, err
	}
	var n int
	err := p.asMember(ctx, role, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, qTerminateRole, role).Scan(&n)
	})
	return n, err
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

// CreateDatabase creates database owned by owner, copied from template0
// with the encoding and locale of databaseOptions, accepting no
// connections until RestrictConnect has run: nobody but the owner ever
// has a session in it, and nothing in it comes from template1.
func (p *Pool) CreateDatabase(ctx context.Context, database, owner string) error {
	return p.CreateDatabaseWith(ctx, database, owner, CreateOptions{})
}

// databaseLocale returns template0's locale, read once per pool.
func (p *Pool) databaseLocale(ctx context.Context, major int) (Locale, error) {
	if l := p.locale.Load(); l != nil {
		return *l, nil
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var l Locale
	var loc, rules *string
	err := p.pool.QueryRow(ctx, qTemplateLocaleFor(major)).Scan(&l.Collate, &l.Ctype, &l.Provider, &loc, &rules)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, &Error{Class: ClassInvalid, msg: "the server has no template0 database: the provider creates every database from template0"}
	}
	if err != nil {
		return l, p.classify(err)
	}
	l.Locale, l.ICURules = deref(loc), deref(rules)
	p.locale.Store(&l)
	return l, nil
}

// SetDatabaseOwner gives database to owner.
func (p *Pool) SetDatabaseOwner(ctx context.Context, database, owner string) error {
	d, o, err := dbAndRole(database, owner)
	if err != nil {
		return err
	}
	return p.asMember(ctx, owner, execOn(fmt.Sprintf(qAlterDatabaseOwner, d, o)))
}

// RestrictConnect leaves database to role alone: it revokes CONNECT and
// TEMPORARY from PUBLIC and grants CONNECT to role, in one transaction that
// reads the result back before it commits (the server takes a REVOKE or
// GRANT the admin may not make with a warning and changes nothing, and
// that is an error here); then, since a REVOKE ends no session, it ends
// every session in the database of a role without CONNECT on it and
// verifies that none remains; only then does the database accept
// connections (it is created accepting none).
func (p *Pool) RestrictConnect(ctx context.Context, database, role string) error {
	d, r, err := dbAndRole(database, role)
	if err != nil {
		return err
	}
	err = p.asMember(ctx, role, func(ctx context.Context, c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf(qRevokePublic, d)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(qGrantConnect, d, r)); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, qConnectRestricted, database, role).Scan(&done); err != nil {
				return err
			}
			if !done {
				return &Error{Class: ClassPrivileges, SQLState: stateNotApplied, msg: fmt.Sprintf("the server did not apply REVOKE CONNECT FROM PUBLIC and GRANT CONNECT TO %q on the database %q (it warned that no privileges could be revoked or granted): the admin role needs the privileges of the database's owner (membership in it with INHERIT)", role, database)}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if err := p.hook(HookForeignSessions); err != nil {
		return p.classify(err)
	}
	if err := p.EndForeignSessions(ctx, database); err != nil {
		return err
	}
	if err := p.hook(HookAllowConnections); err != nil {
		return p.classify(err)
	}
	return p.asMember(ctx, role, execOn(fmt.Sprintf(qAllowConnections, d)))
}

// Fault-injection points of RestrictConnect: after CONNECT is restricted,
// before foreign sessions are ended; before the database accepts
// connections.
const (
	HookForeignSessions  = "before ending the sessions of roles without CONNECT"
	HookAllowConnections = "before ALLOW_CONNECTIONS true"
)

// EndForeignSessions ends every session on database of a role that does
// not hold CONNECT on it, then verifies that none is left. Ending another
// role's session needs that role's privileges or pg_signal_backend's.
func (p *Pool) EndForeignSessions(ctx context.Context, database string) error {
	if _, err := ident("database", database); err != nil {
		return err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var ended, left int32
	if err := p.pool.QueryRow(ctx, qEndForeignSessions, database).Scan(&ended); err != nil {
		e := Classify(err, p.redact...)
		if e.Class == ClassPrivileges {
			return &Error{Class: ClassPrivileges, SQLState: e.SQLState, msg: fmt.Sprintf("a role without CONNECT on the database %q has a session in it that the admin role may not end (%v): end it as a superuser (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s' AND NOT has_database_privilege(usesysid, datid, 'CONNECT')), or GRANT pg_signal_backend TO <the admin role>; the database accepts no new connection until then", database, e, database)}
		}
		return e
	}
	if err := p.pool.QueryRow(ctx, qForeignSessions, database).Scan(&left); err != nil {
		return p.classify(err)
	}
	if left > 0 {
		return &Error{Class: ClassUnavailable, msg: fmt.Sprintf("%d session(s) of roles without CONNECT on the database %q are still there after ending %d: retrying; the database accepts no new connection until none is left", left, database, ended)}
	}
	return nil
}

// execOn returns a function that runs sql on a session.
func execOn(sql string) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, sql)
		return err
	}
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

// TerminateSessions ends every session connected to database, which owner
// owns, and returns how many were signalled.
func (p *Pool) TerminateSessions(ctx context.Context, database, owner string) (int, error) {
	if _, _, err := dbAndRole(database, owner); err != nil {
		return 0, err
	}
	var n int
	err := p.asMember(ctx, owner, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, qTerminate, database).Scan(&n)
	})
	return n, err
}

// DropDatabase drops database, which owner owns, ending its sessions (WITH
// (FORCE)). Absent is success.
func (p *Pool) DropDatabase(ctx context.Context, database, owner string) error {
	d, _, err := dbAndRole(database, owner)
	if err != nil {
		return err
	}
	// Its owner may have marked it a template, which cannot be dropped.
	return p.asMember(ctx, owner, func(ctx context.Context, c *pgx.Conn) error {
		var template bool
		err := c.QueryRow(ctx, qIsTemplate, database).Scan(&template)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if template {
			if _, err := c.Exec(ctx, fmt.Sprintf(qUnmarkTemplate, d)); err != nil {
				return err
			}
		}
		_, err = c.Exec(ctx, fmt.Sprintf(qDropDatabase, d))
		return err
	})
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
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	major, err := p.Major(ctx)
	if err != nil {
		return nil, err
	}
	// The tenant's own session in its own database: only the tenant can
	// create objects there, and CREATE EXTENSION places an extension in the
	// first schema of the search_path (pg_catalog is still searched first
	// for every name, implicitly).
	// Nothing the tenant set for its database or its role there
	// (ALTER DATABASE/ROLE ... SET) applies: a default_transaction_read_only
	// or a statement_timeout of the tenant's must not fail the login check
	// or the extension install (PinnedSettings).
	cfg := p.configOn(database, major, TenantSearchPath)
	cfg.User = cred.Username
	cfg.Password = cred.Password
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

// setSettings returns the ALTER ROLE ... SET statements of settings for
// the quoted role, in tenancy.LimitSettings order, refusing a name off
// the allow-list and a value tenancy.ValidateSetting refuses.
func setSettings(quotedRole string, settings map[string]string) ([]string, error) {
	for name := range settings {
		if !slices.Contains(tenancy.LimitSettings, name) {
			return nil, &Error{Class: ClassInvalid, msg: fmt.Sprintf("refusing to set %q: not one of the session settings a tenant role's limits may set", name)}
		}
	}
	var out []string
	for _, name := range tenancy.LimitSettings {
		v, ok := settings[name]
		if !ok {
			continue
		}
		if err := tenancy.ValidateSetting(name, v); err != nil {
			return nil, &Error{Class: ClassInvalid, msg: fmt.Sprintf("refusing to set %s: %v", name, err)}
		}
		q, err := sqlString(name, v)
		if err != nil {
			return nil, &Error{Class: ClassInvalid, msg: err.Error()}
		}
		out = append(out, fmt.Sprintf(qSetRoleSetting, quotedRole, name, q))
	}
	return out, nil
}

// SetRoleLimits applies what a limits verdict repairs on role, in one
// transaction: its connection limit, its defaults of the allow-listed
// settings, and the reset of those the role has in its own database
// (where they would take precedence). Nothing else of the role changes.
// It needs what altering the role needs: CREATEROLE, and from PostgreSQL
// 16 on ADMIN OPTION on the role.
func (p *Pool) SetRoleLimits(ctx context.Context, role, database string, v tenancy.LimitsVerdict) error {
	d, r, err := dbAndRole(database, role)
	if err != nil {
		return err
	}
	var stmts []string
	if v.ConnectionLimit != nil {
		stmts = append(stmts, fmt.Sprintf(qSetConnectionLimit, r, *v.ConnectionLimit))
	}
	set, err := setSettings(r, v.Set)
	if err != nil {
		return err
	}
	stmts = append(stmts, set...)
	for _, name := range v.ResetInDatabase {
		if !slices.Contains(tenancy.LimitSettings, name) {
			return &Error{Class: ClassInvalid, msg: fmt.Sprintf("refusing to reset %q: not one of the session settings a tenant role's limits may set", name)}
		}
		stmts = append(stmts, fmt.Sprintf(qResetRoleSettingInDB, r, d, name))
	}
	if len(stmts) == 0 {
		return nil
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	return p.classify(pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TenantConnections returns how many connections max_connections leaves
// for tenant roles once the reserved slots (superuser_reserved_connections,
// reserved_connections) and the admin pool are taken, read at most once
// every few minutes per pool.
func (p *Pool) TenantConnections(ctx context.Context) (int32, error) {
	if r := p.tenantConns.Load(); r != nil && time.Since(r.at) < tenantConnsFresh {
		return r.available, nil
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var maxConns, superReserved, reserved int32
	if err := p.pool.QueryRow(ctx, qTenantConnections).Scan(&maxConns, &superReserved, &reserved); err != nil {
		return 0, p.classify(err)
	}
	avail := max(maxConns-superReserved-reserved-p.pool.Config().MaxConns, 0)
	p.tenantConns.Store(&tenantConnsReading{available: avail, at: time.Now()})
	return avail, nil
}

// ConnectionBudget reads what the config's ConnectionBudget condition
// needs; adminPool is the most connections the admin pool opens.
func (p *Pool) ConnectionBudget(ctx context.Context) (tenancy.ConnectionBudgetInput, error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	in := tenancy.ConnectionBudgetInput{AdminPool: p.pool.Config().MaxConns}
	err := p.pool.QueryRow(ctx, qConnectionBudget).Scan(&in.MaxConnections, &in.SuperuserReserved, &in.Reserved, &in.TenantSum, &in.Unlimited, &in.Roles)
	return in, p.classify(err)
}
