package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Access is what an access role, a login role beside a database's owner,
// may do with the owner's data. An access role owns nothing and may
// create nothing: no DDL, no ownership, no CREATE anywhere.
type Access string

const (
	// AccessReadWrite reads and writes the rows of the owner's tables,
	// uses its sequences and calls its routines. It may not TRUNCATE: a
	// TRUNCATE skips the row-level DELETE triggers and cannot be limited
	// by row security, so it stays with the owner, like DDL.
	AccessReadWrite Access = "readWrite"
	// AccessReadOnly reads the rows of the owner's tables and the values
	// of its sequences; nothing else beyond what PUBLIC may do.
	AccessReadOnly Access = "readOnly"
)

// accessPrivileges are the privileges an Access grants, per kind of
// object, as GRANT and has_*_privilege spell them.
type accessPrivileges struct {
	tables, sequences, routines []string
}

// privileges returns what a grants.
func (a Access) privileges() (accessPrivileges, error) {
	switch a {
	case AccessReadWrite:
		return accessPrivileges{
			tables:    []string{"SELECT", "INSERT", "UPDATE", "DELETE"},
			sequences: []string{"USAGE", "SELECT", "UPDATE"},
			routines:  []string{"EXECUTE"},
		}, nil
	case AccessReadOnly:
		return accessPrivileges{
			tables:    []string{"SELECT"},
			sequences: []string{"SELECT"},
		}, nil
	}
	return accessPrivileges{}, &Error{Class: ClassInvalid, msg: fmt.Sprintf("unknown access %q: want %q or %q", a, AccessReadWrite, AccessReadOnly)}
}

// accessStatements returns the statements that give role a's access to
// the objects of the owner in database: CONNECT, then for each schema
// USAGE and the privileges on what exists in it, then the owner's default
// privileges for what it creates later (schemas included).
func accessStatements(database, owner, role string, a Access, schemas []string) ([]string, error) {
	priv, err := a.privileges()
	if err != nil {
		return nil, err
	}
	d, o, r := pgx.Identifier{database}.Sanitize(), pgx.Identifier{owner}.Sanitize(), pgx.Identifier{role}.Sanitize()
	stmts := []string{fmt.Sprintf(qAccessConnect, d, r)}
	for _, s := range schemas {
		sq := pgx.Identifier{s}.Sanitize()
		stmts = append(stmts,
			fmt.Sprintf(qAccessSchemaUsage, sq, r),
			fmt.Sprintf(qAccessTables, strings.Join(priv.tables, ", "), sq, r),
			fmt.Sprintf(qAccessSequences, strings.Join(priv.sequences, ", "), sq, r))
		if len(priv.routines) > 0 {
			stmts = append(stmts, fmt.Sprintf(qAccessRoutines, strings.Join(priv.routines, ", "), sq, r))
		}
	}
	stmts = append(stmts,
		fmt.Sprintf(qAccessDefaultTables, o, strings.Join(priv.tables, ", "), r),
		fmt.Sprintf(qAccessDefaultSequences, o, strings.Join(priv.sequences, ", "), r),
		fmt.Sprintf(qAccessDefaultSchemas, o, r))
	if len(priv.routines) > 0 {
		stmts = append(stmts, fmt.Sprintf(qAccessDefaultRoutines, o, strings.Join(priv.routines, ", "), r))
	}
	return stmts, nil
}

// GrantAccess gives the login role role access a to the objects owner
// owns in database, now and later: in one transaction of an admin session
// on database acting as owner, so every grant is the owner's own. It is
// idempotent; run again, it puts back what the owner revoked since.
func (p *Pool) GrantAccess(ctx context.Context, database, owner, role string, a Access) error {
	if _, err := a.privileges(); err != nil {
		return err
	}
	return p.asOwner(ctx, database, owner, role, func(ctx context.Context, c *pgx.Conn) error {
		if err := p.revokePublicCreate(ctx, c, database, owner); err != nil {
			return err
		}
		return p.inOwnersSchemas(ctx, c, func(schemas []string) ([]string, error) {
			return accessStatements(database, owner, role, a, schemas)
		})
	})
}

// RevokeAccess takes from role everything owner granted it in database
// (GrantAccess's grants, and any other grant of the owner's to it), in one
// transaction of an admin session acting as owner: after it, the role can
// be dropped. It is idempotent.
func (p *Pool) RevokeAccess(ctx context.Context, database, owner, role string) error {
	d, o, r := pgx.Identifier{database}.Sanitize(), pgx.Identifier{owner}.Sanitize(), pgx.Identifier{role}.Sanitize()
	return p.asOwner(ctx, database, owner, role, func(ctx context.Context, c *pgx.Conn) error {
		return p.inOwnersSchemas(ctx, c, func(schemas []string) ([]string, error) {
			stmts := []string{fmt.Sprintf(qRevokeConnect, d, r)}
			for _, s := range schemas {
				sq := pgx.Identifier{s}.Sanitize()
				stmts = append(stmts, fmt.Sprintf(qRevokeSchema, sq, r), fmt.Sprintf(qRevokeTables, sq, r),
					fmt.Sprintf(qRevokeSequences, sq, r), fmt.Sprintf(qRevokeRoutines, sq, r))
			}
			return append(stmts, fmt.Sprintf(qRevokeDefaultTables, o, r), fmt.Sprintf(qRevokeDefaultSequences, o, r),
				fmt.Sprintf(qRevokeDefaultRoutines, o, r), fmt.Sprintf(qRevokeDefaultSchemas, o, r)), nil
		})
	})
}

// asOwner runs fn in an admin session of its own on database acting as
// owner (the names checked first), within the pool's statement timeout.
func (p *Pool) asOwner(ctx context.Context, database, owner, role string, fn func(context.Context, *pgx.Conn) error) error {
	if _, _, err := dbAndRole(database, owner); err != nil {
		return err
	}
	if _, err := ident("role", role); err != nil {
		return err
	}
	major, err := p.Major(ctx)
	if err != nil {
		return err
	}
	c, err := p.connectInside(ctx, database, owner, major)
	if err != nil {
		return err
	}
	defer c.Close(context.Background()) //nolint:errcheck // a session of its own
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	return fn(ctx, c)
}

// inOwnersSchemas runs, in one transaction on c, the statements stmts
// makes for the owner's schemas (qAccessSchemas).
func (p *Pool) inOwnersSchemas(ctx context.Context, c *pgx.Conn, stmts func(schemas []string) ([]string, error)) error {
	err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qAccessSchemas)
		if err != nil {
			return err
		}
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		list, err := stmts(schemas)
		if err != nil {
			return err
		}
		for _, s := range list {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	return p.classify(err)
}

// ObserveAccess lists what role lacks of access a to the objects owner
// owns in database, one line per missing privilege ("table public.t:
// INSERT", "default privileges on tables: SELECT"); none when it has it
// all. It reads, in one query, as owner in database.
func (p *Pool) ObserveAccess(ctx context.Context, database, owner, role string, a Access) ([]string, error) {
	priv, err := a.privileges()
	if err != nil {
		return nil, err
	}
	routines := priv.routines
	if routines == nil {
		routines = []string{}
	}
	var missing []string
	err = p.asOwner(ctx, database, owner, role, func(ctx context.Context, c *pgx.Conn) error {
		rows, err := c.Query(ctx, qAccessMissing, role, priv.tables, priv.sequences, routines)
		if err != nil {
			return p.classify(err)
		}
		missing, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return p.classify(err)
	})
	return missing, err
}

// revokePublicCreate takes CREATE from PUBLIC on the owner's schemas of
// database, in c, a session acting as owner: as the owner where it owns the
// schema, as the admin (RESET ROLE, then SET ROLE again) where it does not
// (public on 14 and before belongs to the bootstrap superuser), after
// giving the owner CREATE there, which it held through PUBLIC. A REVOKE by
// a role that holds no grant option only warns, so what is left is read
// again: an admin that could not is refused with the statement a superuser
// must run.
func (p *Pool) revokePublicCreate(ctx context.Context, c *pgx.Conn, database, owner string) error {
	open, err := schemasPublicCreates(ctx, c)
	if err != nil || len(open) == 0 {
		return p.classify(err)
	}
	for _, s := range open {
		revoke := fmt.Sprintf(qAccessRevokePublicCreate, pgx.Identifier{s.name}.Sanitize())
		if s.owned {
			if _, err := c.Exec(ctx, revoke); err != nil {
				return p.classify(err)
			}
			continue
		}
		if _, err := c.Exec(ctx, qResetRole); err != nil {
			return p.classify(err)
		}
		_, err := c.Exec(ctx, fmt.Sprintf(qAccessOwnerCreate, pgx.Identifier{s.name}.Sanitize(), pgx.Identifier{owner}.Sanitize()))
		if err == nil {
			_, err = c.Exec(ctx, revoke)
		}
		if _, serr := c.Exec(ctx, fmt.Sprintf(qSetRole, pgx.Identifier{owner}.Sanitize())); serr != nil {
			return p.classify(serr)
		}
		if err != nil && ClassOf(p.classify(err)) != ClassPrivileges {
			return p.classify(err)
		}
	}
	left, err := schemasPublicCreates(ctx, c)
	if err != nil {
		return p.classify(err)
	}
	if len(left) > 0 {
		sq := pgx.Identifier{left[0].name}.Sanitize()
		return &Error{Class: ClassPrivileges, msg: fmt.Sprintf(
			"PUBLIC may create in schema %s of database %s, so an access role could too, and the admin role may not change that: "+
				"as a superuser connected to %s, run: %s; %s", left[0].name, database, database,
			fmt.Sprintf(qAccessOwnerCreate, sq, pgx.Identifier{owner}.Sanitize()), fmt.Sprintf(qAccessRevokePublicCreate, sq))}
	}
	return nil
}

// accessSchema is a schema qAccessPublicCreate lists.
type accessSchema struct {
	name  string
	owned bool
}

// schemasPublicCreates runs qAccessPublicCreate in c.
func schemasPublicCreates(ctx context.Context, c *pgx.Conn) ([]accessSchema, error) {
	rows, err := c.Query(ctx, qAccessPublicCreate)
	if err != nil {
		return nil, err
	}
	var out []accessSchema
	var s accessSchema
	_, err = pgx.ForEachRow(rows, []any{&s.name, &s.owned}, func() error {
		out = append(out, s)
		return nil
	})
	return out, err
}
