package postgres

import "context"

// UnpinCleanupSearchPath makes the access cleanup's session inside a
// tenant database run under the search_path the tenant set, until the
// returned function is called: the schema qualification of its statements
// is then all that keeps the tenant's functions and operators out.
func UnpinCleanupSearchPath() (restore func()) {
	insideSearchPath = ""
	return func() { insideSearchPath = SafeSearchPath }
}

// InsideSettings opens the access cleanup's session on database, as it
// opens it, and returns the settings it runs under (SHOW, so that no
// function is called): search_path, default_transaction_read_only,
// statement_timeout and the current user.
func InsideSettings(ctx context.Context, p *Pool, database, role string) ([]string, error) {
	major, err := p.Major(ctx)
	if err != nil {
		return nil, err
	}
	c, err := p.connectInside(ctx, database, role, major)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx) //nolint:errcheck // test
	var out []string
	for _, s := range []string{"SHOW search_path", "SHOW default_transaction_read_only", "SHOW statement_timeout", "SELECT CURRENT_USER::pg_catalog.text"} {
		var v string
		if err := c.QueryRow(ctx, s).Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
