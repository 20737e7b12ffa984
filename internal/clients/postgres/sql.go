package postgres

// Every SQL statement the provider sends lives in this file. Identifiers are
// never built into statements by string concatenation with user input:
// they are passed as parameters, or quoted with pgx.Identifier.Sanitize
// after validation.

// qHealth reads, in one round trip, what the config health check needs: the
// server version and the admin role's privileges.
const qHealth = `SELECT current_setting('server_version'), r.rolsuper, r.rolcreatedb, r.rolcreaterole
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`

// qObserve reads a tenant's database and role in one round trip. $1 is the
// database name, $2 the role name; a missing object gives NULL columns.
// PUBLIC's CONNECT comes from the ACL (NULL = the default, which grants it);
// the role's CONNECT must be an explicit grant.
const qObserve = `SELECT d.oid, pg_catalog.pg_get_userbyid(d.datdba),
  EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
          WHERE a.grantee = 0 AND a.privilege_type = 'CONNECT'),
  EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
          WHERE a.grantee = r.oid AND a.privilege_type = 'CONNECT'),
  r.oid, r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication, r.rolbypassrls, r.rolconnlimit,
  CASE WHEN r.oid IS NULL THEN NULL ELSE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER') END
FROM (SELECT 1) AS one
LEFT JOIN pg_catalog.pg_database d ON d.datname = $1
LEFT JOIN pg_catalog.pg_roles r ON r.rolname = $2`

// qAvailableExtensions: which of $1 the server can install.
const qAvailableExtensions = `SELECT name FROM pg_catalog.pg_available_extensions WHERE name = ANY($1)`

// The statements below take identifiers quoted with pgx.Identifier.Sanitize
// after tenancy.ValidateIdentifier; the password is a SCRAM verifier that
// scram.IsVerifier accepted (base64, '$' and ':' only, no quote).
const (
	qCreateRole       = `CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '%s'`
	qGrantRoleToAdmin = `GRANT %s TO CURRENT_USER`
	// qRepairRole sets only what a CREATEROLE (non-superuser) admin may change;
	// SUPERUSER, REPLICATION and BYPASSRLS can only be reset by a superuser.
	qRepairRole         = `ALTER ROLE %s LOGIN NOCREATEDB NOCREATEROLE CONNECTION LIMIT -1`
	qCreateDatabase     = `CREATE DATABASE %s OWNER %s`
	qAlterDatabaseOwner = `ALTER DATABASE %s OWNER TO %s`
	qRevokePublic       = `REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC`
	qGrantConnect       = `GRANT CONNECT ON DATABASE %s TO %s`
	qBlockLogins        = `ALTER ROLE %s NOLOGIN CONNECTION LIMIT 0`
	qDropDatabase       = `DROP DATABASE IF EXISTS %s WITH (FORCE)`
	qDropRole           = `DROP ROLE IF EXISTS %s`
	qCreateExtension    = `CREATE EXTENSION IF NOT EXISTS %s`
)

// qTerminate ends every other session on database $1 and counts them.
const qTerminate = `SELECT count(*)::int FROM (
  SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity
  WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()) t`

// qExtensions lists the extensions installed in the connected database.
const qExtensions = `SELECT extname FROM pg_catalog.pg_extension`
