package postgres

import (
	"context"
	"fmt"
	"strings"
)

// Health is what a health check learned about a server and the admin role.
type Health struct {
	// Version is the server_version, without a packager's suffix.
	Version    string
	Superuser  bool
	CreateDB   bool
	CreateRole bool
}

// Check runs the health check: a TLS connection per the config's sslMode
// (reused from the pool when one is idle), authentication, the server
// version and the admin role's privileges, in one query.
func (p *Pool) Check(ctx context.Context) (Health, error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var h Health
	err := p.pool.QueryRow(ctx, qHealth).Scan(&h.Version, &h.Superuser, &h.CreateDB, &h.CreateRole)
	// server_version may carry a packager's suffix: "15.18 (Debian 15.18-0+deb12u1)".
	if f := strings.Fields(h.Version); len(f) > 0 {
		h.Version = f[0]
	}
	return h, p.classify(err)
}

// Privileges returns nil when the role may create databases and roles, or
// a ClassPrivileges error naming what is missing. A superuser passes.
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
	if len(missing) == 0 {
		return nil
	}
	return &Error{Class: ClassPrivileges, msg: fmt.Sprintf("the admin role lacks %v: grant them with ALTER ROLE ... %v", missing, missing)}
}
