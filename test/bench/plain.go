package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
)

// plainLoop is the floor's reference: what someone with psql would type
// for a tenant, over one plain pgx session as the same admin role, with
// none of the provider's client (no pool, no membership retry, no
// read-back of the grants, no sessions ended, no OpenBao). It issues the
// same CREATE DATABASE as the provider (a copy of template0 accepting no
// connection until the grants are made; on the test server template0's
// encoding and locale are the ones the provider states), so a CREATE
// DATABASE that costs the floor more than it costs this loop, in the same
// run on the same server, is the floor's own doing.
type plainLoop struct {
	admin  execer
	b      *benchEnv
	member string // the GRANT … TO CURRENT_USER of this major
}

func newPlainLoop(ctx context.Context, b *benchEnv) (*plainLoop, error) {
	pg := b.Postgres
	c, err := plainConn(ctx, b, pg.AdminUser, pg.AdminPassword, "postgres")
	if err != nil {
		return nil, err
	}
	l := &plainLoop{admin: c, b: b, member: "GRANT %s TO CURRENT_USER"}
	if pg.Version >= "16" {
		l.member = "GRANT %s TO CURRENT_USER WITH INHERIT TRUE, SET TRUE"
	}
	return l, nil
}

// execer is the part of a *pgx.Conn the plain loop's admin session uses.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Close(ctx context.Context) error
}

func (l *plainLoop) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.admin.Close(ctx)
}

// plainConn connects like the provider's pool does: to the address, with
// verify-full against the server's name.
func plainConn(ctx context.Context, b *benchEnv, user, password, db string) (*pgx.Conn, error) {
	cfg, err := b.Postgres.ConnConfig(user, password, db)
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Fallbacks = b.Postgres.Hostaddr, nil
	return pgx.ConnectConfig(ctx, cfg)
}

// exec runs stmts in order. Its error never quotes a statement: CREATE
// ROLE carries the role's password verifier.
func (l *plainLoop) exec(ctx context.Context, stmts ...string) error {
	for i, s := range stmts {
		if _, err := l.admin.Exec(ctx, s); err != nil {
			return fmt.Errorf("plain loop, statement %d of %d: %w", i+1, len(stmts), err)
		}
	}
	return nil
}

func (l *plainLoop) createDatabase(ctx context.Context, name, owner string) error {
	return l.exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s TEMPLATE template0 ALLOW_CONNECTIONS false",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{owner}.Sanitize()))
}

// tenant makes one tenant, timing the floor's steps (plainSteps) into steps.
func (l *plainLoop) tenant(ctx context.Context, name string, steps map[string]time.Duration) error {
	t := time.Now()
	lap := func(step string) {
		now := time.Now()
		steps[step] += now.Sub(t)
		t = now
	}
	id := pgx.Identifier{name}.Sanitize()
	password, err := database.NewPassword()
	if err != nil {
		return err
	}
	verifier, err := scram.Verifier(password)
	if err != nil {
		return err
	}
	if err := l.exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", id, verifier), fmt.Sprintf(l.member, id)); err != nil {
		return err
	}
	lap("create role")
	if err := l.createDatabase(ctx, name, name); err != nil {
		return err
	}
	lap("create database")
	if err := l.exec(ctx,
		fmt.Sprintf("REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC", id),
		fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", id, id),
		fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS true", id)); err != nil {
		return err
	}
	lap("connect grants")
	c, err := plainConn(ctx, l.b, name, password, name)
	if err != nil {
		return err
	}
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_trgm"); err != nil {
		_ = c.Close(ctx)
		return err
	}
	if err := c.Close(ctx); err != nil {
		return err
	}
	lap("extension login")
	c, err = plainConn(ctx, l.b, name, password, name)
	if err != nil {
		return err
	}
	var exts int
	err = c.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_extension").Scan(&exts)
	_ = c.Close(ctx)
	if err != nil {
		return err
	}
	if exts < 2 { // plpgsql and pg_trgm
		return fmt.Errorf("%s: %d extensions", name, exts)
	}
	lap("verify login")
	return nil
}
