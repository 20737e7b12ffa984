package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CleanupReport is what an access cleanup removed and what is left.
type CleanupReport struct {
	// Counts of the REVOKEs and ALTER DEFAULT PRIVILEGES statements the
	// server took, and of the sessions ended.
	DatabaseGrants, Memberships, DefaultPrivileges, ObjectGrants, Sessions int
	// Remaining lists what is still there after the cleanup, each with
	// the reason and what an admin can do. It never names the admin role.
	Remaining []string
}

// Fault-injection points of CleanupAccess, between its steps.
const (
	HookCleanupMembers  = "access cleanup: before the memberships"
	HookCleanupInside   = "access cleanup: before the grants inside the database"
	HookCleanupSessions = "access cleanup: before ending other roles' sessions"
)

// CleanupAccess removes every access to database other than its login
// role's (role, the owner), the admin's and the roles in keep (the
// Database's own data roles): the database's privileges of other roles,
// other roles' memberships in role, role's default privileges for other
// roles and other roles' privileges on objects inside the database; then
// it ends other roles' sessions on the database. A kept role keeps its
// CONNECT, the default privileges role set for it, its privileges on the
// database's objects and its sessions; what else it holds on the database
// (CREATE, TEMPORARY, CONNECT's grant option) and a membership in role are
// removed as any other role's. Each
// step reads the catalog afresh, so running it again after an
// interruption finishes the job and running it on a clean database
// changes nothing. What it cannot remove is in the report's Remaining.
//
// The steps inside the database run in one admin session on it, started
// with PinnedSettings (search_path pg_catalog, pg_temp; nothing the
// tenant set for the database or its role applies) and then acting as the
// login role (SET ROLE): the statements resolve no object of the tenant's,
// and whatever might still run would have only the tenant's privileges.
func (p *Pool) CleanupAccess(ctx context.Context, database, role string, keep []string) (CleanupReport, error) {
	var rep CleanupReport
	d, r, err := dbAndRole(database, role)
	if err != nil {
		return rep, err
	}
	for _, k := range keep {
		if _, err := ident("role", k); err != nil {
			return rep, err
		}
	}
	if keep == nil {
		keep = []string{}
	}
	major, err := p.Major(ctx)
	if err != nil {
		return rep, err
	}
	redact := p.adminRedactor()

	// 1. The database's privileges of other roles, with the owner's
	// privileges (the admin holds them through its membership).
	if err := p.revokeDatabaseGrants(ctx, database, role, d, keep, &rep); err != nil {
		return rep, err
	}

	// 2. Other roles' memberships in the login role.
	if err := p.hook(HookCleanupMembers); err != nil {
		return rep, p.classify(err)
	}
	refused, err := p.revokeMemberships(ctx, role, r, major, &rep)
	if err != nil {
		return rep, err
	}
	if err := p.reportMembershipsLeft(ctx, role, r, major, refused, &rep, redact); err != nil {
		return rep, err
	}

	// 3. Inside the database.
	if err := p.hook(HookCleanupInside); err != nil {
		return rep, p.classify(err)
	}
	if err := p.cleanupInside(ctx, database, role, keep, major, &rep, redact); err != nil {
		return rep, err
	}

	// 4. Other roles' sessions on the database, now that none of them
	// may connect again.
	if err := p.hook(HookCleanupSessions); err != nil {
		return rep, p.classify(err)
	}
	if err := p.endOtherSessions(ctx, database, role, keep, &rep, redact); err != nil {
		return rep, err
	}
	return rep, nil
}

// revokeDatabaseGrants revokes the privileges other roles hold on the
// database (d is its quoted name), acting as the login role: all of them,
// or for a kept role all but its CONNECT. It counts the roles done.
func (p *Pool) revokeDatabaseGrants(ctx context.Context, database, role, d string, keep []string, rep *CleanupReport) error {
	grantees, err := p.queryPairs(ctx, qCleanupDatabaseGrantees, database, role, keep)
	if err != nil {
		return err
	}
	for _, g := range grantees {
		who := pgx.Identifier{g[0]}.Sanitize()
		stmts := []string{fmt.Sprintf(qRevokeDatabase, d, who)}
		if g[1] == "true" {
			// A kept role keeps its CONNECT, and only that.
			stmts = []string{fmt.Sprintf(qRevokeDatabaseExtra, d, who), fmt.Sprintf(qRevokeConnectOption, d, who)}
		}
		for _, stmt := range stmts {
			if err := p.asMember(ctx, role, execOn(stmt)); err != nil {
				return err
			}
		}
		rep.DatabaseGrants++
	}
	return nil
}

// revokeMemberships revokes other roles' memberships in the login role (r
// is its quoted name), per grantor from PostgreSQL 16 on, and counts them.
// It returns the grants the server refused to revoke, by member and
// grantor, with the server's error.
func (p *Pool) revokeMemberships(ctx context.Context, role, r string, major int, rep *CleanupReport) (map[string]string, error) {
	refused := map[string]string{}
	members, err := p.queryPairs(ctx, qCleanupMembers, role)
	if err != nil {
		return refused, err
	}
	for _, m := range members {
		versionPoint("CleanupAccess.revokeMember")
		stmt := fmt.Sprintf(qRevokeMember, r, pgx.Identifier{m[0]}.Sanitize())
		if major >= 16 && m[1] != "" {
			stmt = fmt.Sprintf(qRevokeMember16, r, pgx.Identifier{m[0]}.Sanitize(), pgx.Identifier{m[1]}.Sanitize())
		}
		err := p.exec(ctx, stmt)
		switch {
		case err == nil:
			rep.Memberships++
		case ClassOf(err) == ClassPrivileges:
			refused[m[0]+"\x00"+m[1]] = err.Error()
		default:
			return refused, err
		}
	}
	return refused, nil
}

// reportMembershipsLeft reads the memberships in the login role again and
// adds each one still there to the report, with why it is left and how an
// admin can revoke it.
func (p *Pool) reportMembershipsLeft(ctx context.Context, role, r string, major int, refused map[string]string, rep *CleanupReport, redact func(string) string) error {
	left, err := p.queryPairs(ctx, qCleanupMembers, role)
	if err != nil {
		return err
	}
	for _, m := range left {
		versionPoint("CleanupAccess.remainingMember")
		why := "the server kept it"
		if e, ok := refused[m[0]+"\x00"+m[1]]; ok {
			why = "the server refused to revoke it (" + e + ")"
		}
		stmt := fmt.Sprintf("REVOKE %s FROM %s", r, pgx.Identifier{m[0]}.Sanitize())
		if major >= 16 && m[1] != "" {
			stmt += " GRANTED BY " + pgx.Identifier{m[1]}.Sanitize()
		}
		hint := "revoke it as a superuser"
		if major >= 16 {
			hint = "from PostgreSQL 16 on a grant is revoked by its grantor or a role with the grantor's privileges; a grant a superuser made needs a superuser"
		}
		rep.Remaining = append(rep.Remaining, redact(fmt.Sprintf("membership of %q in the login role, granted by %q: %s; %s (%s)", m[0], m[1], why, hint, stmt)))
	}
	return nil
}

// endOtherSessions ends the sessions on the database of roles other than
// the login role, the kept roles and the admin, counts them, and adds to
// the report the sessions it could not end.
func (p *Pool) endOtherSessions(ctx context.Context, database, role string, keep []string, rep *CleanupReport, redact func(string) string) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var ended int32
	if err := p.pool.QueryRow(ctx, qCleanupEndSessions, database, role, keep).Scan(&ended); err != nil {
		return p.classify(err)
	}
	rep.Sessions = int(ended)
	rows, err := p.pool.Query(ctx, qCleanupSessionsLeft, database, role, keep)
	if err != nil {
		return p.classify(err)
	}
	var who string
	var super bool
	var n int32
	_, err = pgx.ForEachRow(rows, []any{&who, &super, &n}, func() error {
		why := "the admin role may not end them: GRANT pg_signal_backend TO <the admin role>, or end them as a superuser"
		if super {
			why = "a superuser's sessions: only a superuser may end them"
		}
		rep.Remaining = append(rep.Remaining, redact(fmt.Sprintf("%d session(s) of %q on the database: %s", n, who, why)))
		return nil
	})
	return p.classify(err)
}

// cleanupInside runs the steps inside the database: the login role's
// default privileges for other roles, and other roles' privileges on the
// database's objects; then it reports what is left and the objects other
// roles own there.
func (p *Pool) cleanupInside(ctx context.Context, database, role string, keep []string, major int, rep *CleanupReport, redact func(string) string) error {
	c, err := p.connectInside(ctx, database, role, major)
	if err != nil {
		return err
	}
	defer c.Close(context.Background()) //nolint:errcheck // closing a session we are done with
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()

	if err := p.revokeDefaultACLs(ctx, c, role, keep, rep); err != nil {
		return err
	}
	if err := p.revokeObjectGrants(ctx, c, role, keep, rep); err != nil {
		return err
	}

	// What is left, read again.
	if err := p.reportDefaultACLsLeft(ctx, c, role, keep, rep, redact); err != nil {
		return err
	}
	if err := p.reportObjectGrantsLeft(ctx, c, role, keep, rep, redact); err != nil {
		return err
	}
	return p.reportForeignOwned(ctx, c, role, rep, redact)
}

// defaultACL is one row of qCleanupDefaultACL.
type defaultACL struct {
	own                         bool
	forRole, schema, kind, whom string
}

// readDefaultACLs reads the default privileges of qCleanupDefaultACL in
// the session c.
func readDefaultACLs(ctx context.Context, c *pgx.Conn, role string, keep []string) ([]defaultACL, error) {
	rows, err := c.Query(ctx, qCleanupDefaultACL, role, keep)
	if err != nil {
		return nil, err
	}
	var out []defaultACL
	var x defaultACL
	_, err = pgx.ForEachRow(rows, []any{&x.own, &x.forRole, &x.schema, &x.kind, &x.whom}, func() error {
		out = append(out, x)
		return nil
	})
	return out, err
}

// revokeDefaultACLs revokes the default privileges the login role set for
// other roles, of the kinds ALTER DEFAULT PRIVILEGES names, and counts
// them. Default privileges other roles set are left for the report.
func (p *Pool) revokeDefaultACLs(ctx context.Context, c *pgx.Conn, role string, keep []string, rep *CleanupReport) error {
	defs, err := readDefaultACLs(ctx, c, role, keep)
	if err != nil {
		return p.classify(err)
	}
	for _, x := range defs {
		kind := defaultACLKinds[x.kind]
		if !x.own || kind == "" {
			continue
		}
		in := ""
		if x.schema != "" {
			in = " IN SCHEMA " + pgx.Identifier{x.schema}.Sanitize()
		}
		stmt := fmt.Sprintf(qRevokeDefaultACL, pgx.Identifier{x.forRole}.Sanitize(), in, kind, pgx.Identifier{x.whom}.Sanitize())
		if _, err := c.Exec(ctx, stmt); err != nil {
			return p.classify(err)
		}
		rep.DefaultPrivileges++
	}
	return nil
}

// revokeObjectGrants revokes other roles' privileges on the database's
// objects, of the kinds it has a statement for, and counts them.
func (p *Pool) revokeObjectGrants(ctx context.Context, c *pgx.Conn, role string, keep []string, rep *CleanupReport) error {
	grants, err := readObjectGrants(ctx, c, role, keep)
	if err != nil {
		return p.classify(err)
	}
	for _, g := range grants {
		stmt := g.revoke()
		if stmt == "" {
			continue
		}
		if _, err := c.Exec(ctx, stmt); err != nil {
			return p.classify(err)
		}
		rep.ObjectGrants++
	}
	return nil
}

// reportDefaultACLsLeft reads the default privileges again and adds each
// one still there to the report, with why it is left.
func (p *Pool) reportDefaultACLsLeft(ctx context.Context, c *pgx.Conn, role string, keep []string, rep *CleanupReport, redact func(string) string) error {
	defs, err := readDefaultACLs(ctx, c, role, keep)
	if err != nil {
		return p.classify(err)
	}
	for _, x := range defs {
		where := "in every schema"
		if x.schema != "" {
			where = "in schema " + x.schema
		}
		why := "the server kept it"
		if !x.own {
			why = fmt.Sprintf("set by %q for the objects it creates; remove it as that role or a superuser (ALTER DEFAULT PRIVILEGES FOR ROLE %s ... REVOKE ALL ... FROM %s), and see the objects it owns", x.forRole, pgx.Identifier{x.forRole}.Sanitize(), pgx.Identifier{x.whom}.Sanitize())
		}
		rep.Remaining = append(rep.Remaining, redact(fmt.Sprintf("default privileges of %q %s on %s for %q: %s", x.forRole, where, defaultACLKinds[x.kind], x.whom, why)))
	}
	return nil
}

// reportObjectGrantsLeft reads other roles' privileges on the database's
// objects again and adds each one still there to the report, with why it
// is left.
func (p *Pool) reportObjectGrantsLeft(ctx context.Context, c *pgx.Conn, role string, keep []string, rep *CleanupReport, redact func(string) string) error {
	grants, err := readObjectGrants(ctx, c, role, keep)
	if err != nil {
		return p.classify(err)
	}
	for _, g := range grants {
		why := "not revoked by the owner: the object is another role's, or the grant came from another grantor; revoke it as that role or a superuser"
		if g.kind == "" {
			why = "a kind of object the cleanup does not revoke on; revoke it by hand"
		}
		rep.Remaining = append(rep.Remaining, redact(fmt.Sprintf("privileges of %q on %s: %s", g.grantee, g.describe, why)))
	}
	return nil
}

// reportForeignOwned adds to the report the objects of the database that
// roles other than the login role and the admin own.
func (p *Pool) reportForeignOwned(ctx context.Context, c *pgx.Conn, role string, rep *CleanupReport, redact func(string) string) error {
	rows, err := c.Query(ctx, qCleanupForeignOwned, role)
	if err != nil {
		return p.classify(err)
	}
	var what, owner string
	_, err = pgx.ForEachRow(rows, []any{&what, &owner}, func() error {
		rep.Remaining = append(rep.Remaining, redact(fmt.Sprintf("%s is owned by %q, not the login role: its owner keeps every privilege on it (and a function or operator of its runs as whoever calls it); reassign or drop it after checking what it is", what, owner)))
		return nil
	})
	return p.classify(err)
}

// defaultACLKinds are the object kinds of pg_default_acl.defaclobjtype as
// ALTER DEFAULT PRIVILEGES names them.
var defaultACLKinds = map[string]string{"r": "TABLES", "S": "SEQUENCES", "f": "FUNCTIONS", "T": "TYPES", "n": "SCHEMAS", "L": "LARGE OBJECTS"}

// objectGrant is one row of qCleanupObjectGrants.
type objectGrant struct {
	kind, schema, name, column string
	argSchemas, argTypes       []string
	oid                        int64
	grantee, describe          string
}

func readObjectGrants(ctx context.Context, c *pgx.Conn, role string, keep []string) ([]objectGrant, error) {
	rows, err := c.Query(ctx, qCleanupObjectGrants, role, keep)
	if err != nil {
		return nil, err
	}
	var out []objectGrant
	var g objectGrant
	_, err = pgx.ForEachRow(rows, []any{&g.kind, &g.schema, &g.name, &g.column, &g.argSchemas, &g.argTypes, &g.oid, &g.grantee, &g.describe}, func() error {
		x := g
		x.argSchemas, x.argTypes = slices.Clone(g.argSchemas), slices.Clone(g.argTypes)
		out = append(out, x)
		return nil
	})
	return out, err
}

// revoke is the statement that revokes g, every name quoted here; "" for
// a kind without one.
func (g objectGrant) revoke() string {
	who := pgx.Identifier{g.grantee}.Sanitize()
	qualified := pgx.Identifier{g.schema, g.name}.Sanitize()
	switch g.kind {
	case "table":
		return fmt.Sprintf(qRevokeTable, qualified, who)
	case "column":
		return fmt.Sprintf(qRevokeColumn, pgx.Identifier{g.column}.Sanitize(), qualified, who)
	case "schema":
		return fmt.Sprintf(qRevokeSchema, pgx.Identifier{g.schema}.Sanitize(), who)
	case "routine":
		if len(g.argSchemas) != len(g.argTypes) {
			return ""
		}
		args := make([]string, len(g.argTypes))
		for i := range g.argTypes {
			args[i] = pgx.Identifier{g.argSchemas[i], g.argTypes[i]}.Sanitize()
		}
		return fmt.Sprintf(qRevokeRoutine, qualified, strings.Join(args, ", "), who)
	case "type":
		return fmt.Sprintf(qRevokeType, qualified, who)
	case "large object":
		return fmt.Sprintf(qRevokeLargeObject, g.oid, who)
	case "language":
		return fmt.Sprintf(qRevokeLanguage, pgx.Identifier{g.name}.Sanitize(), who)
	case "foreign data wrapper":
		return fmt.Sprintf(qRevokeFDW, pgx.Identifier{g.name}.Sanitize(), who)
	case "foreign server":
		return fmt.Sprintf(qRevokeServer, pgx.Identifier{g.name}.Sanitize(), who)
	}
	return ""
}

// insideSearchPath is SafeSearchPath; a test changes it to prove that
// every statement is schema-qualified.
var insideSearchPath = SafeSearchPath

// configOn is the connection configuration of a session on database, a
// database other than the admin's own: the admin pool's (no PG* variable
// applies), with PinnedSettings at startup, so that nothing set for that
// database, or for the role in it, applies to the session.
func (p *Pool) configOn(database string, major int, searchPath string) *pgx.ConnConfig {
	cfg := p.pool.Config().ConnConfig.Copy()
	cfg.Database = database
	for k, v := range PinnedSettings(major, searchPath) {
		cfg.RuntimeParams[k] = v
	}
	return cfg
}

// connectInside opens the admin's session on a tenant database for the
// cleanup: PinnedSettings at startup, then SET ROLE to the login role.
func (p *Pool) connectInside(ctx context.Context, database, role string, major int) (*pgx.Conn, error) {
	cfg := p.configOn(database, major, SafeSearchPath)
	if insideSearchPath != SafeSearchPath {
		// Tests only: the tenant's search_path applies, to show that the
		// statements resolve nothing of the tenant's even then.
		delete(cfg.RuntimeParams, "search_path")
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, p.classify(err)
	}
	if _, err := c.Exec(ctx, fmt.Sprintf(qSetRole, pgx.Identifier{role}.Sanitize())); err != nil {
		_ = c.Close(context.Background())
		return nil, p.classify(err)
	}
	return c, nil
}

// queryPairs runs a two-column query on the admin pool.
func (p *Pool) queryPairs(ctx context.Context, q string, args ...any) ([][2]string, error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, p.classify(err)
	}
	var out [][2]string
	var a, b string
	_, err = pgx.ForEachRow(rows, []any{&a, &b}, func() error {
		out = append(out, [2]string{a, b})
		return nil
	})
	return out, p.classify(err)
}

// adminRedactor replaces the admin role's name in a report line.
func (p *Pool) adminRedactor() func(string) string {
	admin := p.pool.Config().ConnConfig.User
	return func(s string) string {
		if admin == "" {
			return s
		}
		return strings.ReplaceAll(s, admin, "<the admin role>")
	}
}
