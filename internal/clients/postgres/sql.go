package postgres

// Every SQL statement the provider sends lives in this file. Identifiers are
// never built into statements by string concatenation with user input:
// they are passed as parameters, or quoted with pgx.Identifier.Sanitize
// after validation.

// qHealth reads, in one round trip, what the config health check needs: the
// server version and the admin role's privileges.
const qHealth = `SELECT current_setting('server_version'), r.rolsuper, r.rolcreatedb, r.rolcreaterole
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`
