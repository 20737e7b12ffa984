package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"ddupan.top/provider-postgresql-tenant/internal/metrics"
)

// A PostgreSQL session caches the list of roles it is a member of and
// checks privileges against that list. Under a wave of role creations, a
// pooled admin session was measured acting on a list older than a
// membership granted and committed moments before: CREATE DATABASE ...
// OWNER failed with "must be able to SET ROLE", and the REVOKE and GRANT
// of CONNECT on the tenant's database only warned that no privileges could
// be revoked or granted, and changed nothing. Such a session stays wrong
// until the next change to any role, so retrying on it may never succeed,
// and the pool hands the same idle session out again and again.
//
// The statements that need the admin's membership in a tenant role
// therefore run through asMember: when the server refuses one for lack of
// privileges while pg_auth_members, read in the same session with a plain
// query (which does not go through that cache), shows the membership, the
// session is closed, so that no later statement uses it, and the statement
// runs again on another session. A real lack of privileges is returned as
// it is, and costs no connection.

// HookMember is the fault-injection point before each attempt of a
// statement that needs the admin's membership in a tenant role: an error
// from the hook counts as the attempt's result.
const HookMember = "before a statement that needs the admin's membership"

// stateNotApplied is the SQLSTATE of the warning the server gives instead
// of applying a REVOKE the session may not make (warning_privilege_not_revoked),
// used for an *Error saying a GRANT or REVOKE changed nothing.
const stateNotApplied = "01006"

// refusedForPrivileges reports whether err is the server refusing a
// statement for lack of privileges, or a GRANT or REVOKE it did not apply.
func refusedForPrivileges(err error) bool {
	var pe *pgconn.PgError
	var e *Error
	return (errors.As(err, &pe) && pe.Code == "42501") || (errors.As(err, &e) && e.SQLState == stateNotApplied)
}

// asMember runs fn on one pooled admin session, as described above; role
// is the tenant role whose membership fn relies on. fn must leave the
// session idle (outside a transaction) when it returns.
func (p *Pool) asMember(ctx context.Context, role string, fn func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	major, err := p.Major(ctx)
	if err != nil {
		return err
	}
	return p.onCurrentSession(ctx, func(c *pgxpool.Conn) (bool, error) {
		err := p.hook(HookMember)
		if err == nil {
			err = fn(ctx, c.Conn())
		}
		return err != nil && refusedForPrivileges(err) && p.membershipGranted(ctx, c, major, role), err
	})
}

// onCurrentSession runs attempt on a pooled session. When attempt says the
// session acts on an outdated list of its memberships, the session is
// closed and attempt runs again on another one, at most once more than
// the pool has sessions (every stale one is closed, so the last attempt
// runs on a new one). attempt's error is returned classified.
func (p *Pool) onCurrentSession(ctx context.Context, attempt func(*pgxpool.Conn) (stale bool, err error)) error {
	for n := int32(0); ; n++ {
		c, err := p.pool.Acquire(ctx)
		if err != nil {
			return p.classify(err)
		}
		stale, err := attempt(c)
		if !stale || n >= p.pool.Config().MaxConns {
			c.Release()
			return p.classify(err)
		}
		p.discard(ctx, c)
	}
}

// outdatedMemberships reports whether an observation came from a session
// whose privilege checks act on an outdated list of its memberships: the
// catalog table holds the admin's membership in the tenant role (granted)
// while the privilege functions deny it (member). Its answer would call
// for a repair of the membership that changes nothing, again at every
// poll for as long as the session lives.
func outdatedMemberships(member, granted *bool) bool {
	return deref(granted) && !deref(member)
}

// membershipGranted reads pg_auth_members in c's session: does it hold the
// admin's membership in role with the options provisioning grants? A
// failed read counts as no.
func (p *Pool) membershipGranted(ctx context.Context, c *pgxpool.Conn, major int, role string) bool {
	var granted bool
	if err := c.Conn().QueryRow(ctx, qMembershipGranted(major), role).Scan(&granted); err != nil {
		return false
	}
	return granted
}

// discard closes c's session, which the pool then drops instead of handing
// it out again, and counts it.
func (p *Pool) discard(ctx context.Context, c *pgxpool.Conn) {
	_ = c.Conn().Close(ctx)
	c.Release()
	metrics.StaleAdminSession()
}
