package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Managed describes a server reconfigured like a managed service's.
type Managed struct {
	// AdminUser/AdminPassword: the admin a managed service hands out: no
	// superuser, CREATEDB and CREATEROLE, member of ManagedGroup.
	AdminUser, AdminPassword string
	// ManagedGroup is the rds_superuser-like group the admin belongs to.
	ManagedGroup string
	// AllowedExtensions is the server's extension allow-list
	// (rds.allowed_extensions).
	AllowedExtensions []string
}

// MakeManagedLike reconfigures the running server the way a managed
// PostgreSQL service is set up, for tests of the provider on one: the
// server certificate names the host's DNS name only (no IP SAN), the
// extension allow-list rds.allowed_extensions is set, and a new admin role
// is no superuser but has CREATEDB and CREATEROLE and is a member of an
// rds_superuser-like group. The harness's own connections keep working:
// they verify the host name.
func (p *Postgres) MakeManagedLike(ctx context.Context, allowed []string) (*Managed, error) {
	kp, err := p.CA.issue(p.dir, "server-dns-only", []string{p.Host}, nil)
	if err != nil {
		return nil, err
	}
	if err := p.chown(p.dir); err != nil {
		return nil, err
	}
	m := &Managed{AdminUser: "managed_admin", AdminPassword: RandomSecret("mgd-"), ManagedGroup: "rds_superuser", AllowedExtensions: allowed}
	c, err := p.SuperConn(ctx, "postgres")
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx) //nolint:errcheck // best effort
	// postgresql.conf, not ALTER SYSTEM: before 15, ALTER SYSTEM refuses a
	// custom setting such as rds.allowed_extensions. A later line wins.
	conf := fmt.Sprintf("\nssl_cert_file = '%s'\nssl_key_file = '%s'\nrds.allowed_extensions = '%s'\n", kp.CertFile, kp.KeyFile, strings.Join(allowed, ","))
	if err := appendFile(filepath.Join(p.dataDir, "postgresql.conf"), conf); err != nil {
		return nil, err
	}
	for _, s := range []string{
		"SELECT pg_reload_conf()",
		"CREATE ROLE " + pgx.Identifier{m.ManagedGroup}.Sanitize() + " NOLOGIN",
	} {
		if _, err := c.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	if err := p.CreateRole(ctx, m.AdminUser, m.AdminPassword, "NOSUPERUSER CREATEDB CREATEROLE IN ROLE "+pgx.Identifier{m.ManagedGroup}.Sanitize()); err != nil {
		return nil, err
	}
	return m, nil
}
