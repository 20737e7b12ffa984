package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// A data role's login members (see tenancy.MemberName): the data role
// holds the privileges, its members log in and inherit them.

// ObserveMembers reads the catalog of the login members m1 and m2 in one
// round trip on the admin pool: of each, whether it exists, its OID,
// attributes, INHERIT, connection limit, the admin's membership, its
// password expiry and (where readable) verifier digest, and its limits in
// database. The database's own fields are left unset.
func (p *Pool) ObserveMembers(ctx context.Context, database, m1, m2 string) ([2]Catalog, error) {
	var out [2]Catalog
	for _, r := range []string{m1, m2} {
		if _, _, err := dbAndRole(database, r); err != nil {
			return out, err
		}
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	major, err := p.Major(ctx)
	if err != nil {
		return out, err
	}
	readable, err := p.verifierReadable(ctx)
	if err != nil {
		return out, err
	}
	err = p.onCurrentSession(ctx, func(c *pgxpool.Conn) (bool, error) {
		out = [2]Catalog{}
		rows, err := c.Conn().Query(ctx, qMembers(major, readable), database, m1, m2)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		stale := false
		for rows.Next() {
			var i int32
			var cat Catalog
			var member, granted *bool
			var validUntil *string
			var verifier []byte
			if err := rows.Scan(&i, &cat.RoleOID, &cat.Login, &cat.Superuser, &cat.CreateDB, &cat.CreateRole, &cat.Replication, &cat.BypassRLS,
				&cat.ConnLimit, &cat.Inherit, &member, &granted, &validUntil, &verifier, &cat.RoleSettings, &cat.DatabaseSettings); err != nil {
				return false, err
			}
			if i < 1 || i > 2 {
				continue
			}
			cat.RoleExists, cat.AdminMember, cat.ValidUntil = true, deref(member), deref(validUntil)
			if len(verifier) > 0 {
				cat.VerifierDigest = hex.EncodeToString(verifier)
			}
			stale = stale || outdatedMemberships(member, granted)
			out[i-1] = cat
		}
		return stale, rows.Err()
	})
	return out, err
}

// CreateMember creates member, a login member of the data role group, with
// a SCRAM-SHA-256 verifier and limits l, a member of group inheriting its
// privileges, and makes the admin a member of it, in one transaction.
func (p *Pool) CreateMember(ctx context.Context, group, member, verifier string, l tenancy.EffectiveLimits) error {
	g, m, err := groupAndMember(group, member)
	if err != nil {
		return err
	}
	if !scram.IsVerifier(verifier) {
		return errors.New("refusing to send a role password that is not a SCRAM-SHA-256 verifier")
	}
	stmts := []string{fmt.Sprintf(qCreateMember, m, verifier)}
	if l.ConnectionLimit != nil {
		stmts[0] += fmt.Sprintf(qCreateRoleConnectionLimit, *l.ConnectionLimit)
	}
	settings, err := setSettings(m, l.Settings)
	if err != nil {
		return err
	}
	grants, err := p.memberships(ctx, g, m)
	if err != nil {
		return err
	}
	return p.inTransaction(ctx, append(append(stmts, settings...), grants...))
}

// SetMemberPassword gives member, a login member of group, LOGIN and a
// SCRAM-SHA-256 verifier, and its membership in group back, in one
// transaction.
func (p *Pool) SetMemberPassword(ctx context.Context, group, member, verifier string) error {
	g, m, err := groupAndMember(group, member)
	if err != nil {
		return err
	}
	if !scram.IsVerifier(verifier) {
		return errors.New("refusing to send a role password that is not a SCRAM-SHA-256 verifier")
	}
	join, err := p.grantToMember(ctx, g, m)
	if err != nil {
		return err
	}
	return p.inTransaction(ctx, []string{fmt.Sprintf(qSetMemberLogin, m, verifier), join})
}

// RepairMember gives member back LOGIN, INHERIT and no CREATEDB or
// CREATEROLE, its membership in group and the admin's membership in it.
// It never touches the password.
func (p *Pool) RepairMember(ctx context.Context, group, member string) error {
	g, m, err := groupAndMember(group, member)
	if err != nil {
		return err
	}
	grants, err := p.memberships(ctx, g, m)
	if err != nil {
		return err
	}
	return p.inTransaction(ctx, append([]string{fmt.Sprintf(qRepairMember, m)}, grants...))
}

// RepairGroup resets what a CREATEROLE admin may reset of a data role's
// role: NOCREATEDB NOCREATEROLE. Its LOGIN is left as it is.
func (p *Pool) RepairGroup(ctx context.Context, group string) error {
	g, err := ident("role", group)
	if err != nil {
		return err
	}
	return p.exec(ctx, fmt.Sprintf(qRepairGroup, g))
}

// RetireLogin takes role's login: NOLOGIN and no password, so that no
// credential logs in as it any more; with endSessions, its sessions are
// ended in the same transaction (one that sets a password meanwhile waits
// for it and is ended). It returns how many sessions ended.
func (p *Pool) RetireLogin(ctx context.Context, role string, endSessions bool) (int, error) {
	r, err := ident("role", role)
	if err != nil {
		return 0, err
	}
	if !endSessions {
		return 0, p.exec(ctx, fmt.Sprintf(qRetireLogin, r))
	}
	return p.alterEndingSessions(ctx, role, fmt.Sprintf(qRetireLogin, r))
}

// groupAndMember validates and quotes a data role's role and one of its
// login members.
func groupAndMember(group, member string) (string, string, error) {
	g, err := ident("role", group)
	if err != nil {
		return "", "", err
	}
	m, err := ident("role", member)
	return g, m, err
}

// memberships are the grants a login member holds: its membership in the
// data role, and the admin's in it.
func (p *Pool) memberships(ctx context.Context, quotedGroup, quotedMember string) ([]string, error) {
	join, err := p.grantToMember(ctx, quotedGroup, quotedMember)
	if err != nil {
		return nil, err
	}
	admin, err := p.grantToAdmin(ctx, quotedMember)
	if err != nil {
		return nil, err
	}
	return []string{join, admin}, nil
}

func (p *Pool) grantToMember(ctx context.Context, quotedGroup, quotedMember string) (string, error) {
	major, err := p.Major(ctx)
	if err != nil {
		return "", err
	}
	versionPoint("grantToMember")
	if major >= 16 {
		return fmt.Sprintf(qGrantToMember16, quotedGroup, quotedMember), nil
	}
	return fmt.Sprintf(qGrantToMember, quotedGroup, quotedMember), nil
}

func (p *Pool) inTransaction(ctx context.Context, stmts []string) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	return p.classify(err)
}
