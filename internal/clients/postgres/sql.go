package postgres

import (
	"fmt"
	"strings"
)

// Every SQL statement the provider sends lives in this file.
//
// Identifiers are never built into statements by string concatenation with
// user input: they are passed as parameters, or quoted with
// pgx.Identifier.Sanitize after validation.
//
// Every statement is written so that no object a tenant could create can
// change what it does, even on a server where PUBLIC may create objects in
// a schema on the session's search_path (every server initialised before
// PostgreSQL 15, and every cluster upgraded from one):
//   - sessions pin search_path to "pg_catalog, pg_temp" (see pool.go);
//   - every function and operator is schema-qualified (OPERATOR(pg_catalog.=));
//   - every literal and parameter carries its type, so operator resolution
//     never has to choose between candidates with implicit casts.
// Either of the first two alone stops the known hijacks; together with the
// third, a future statement that forgets one of them is still safe.

// SafeSearchPath is the search_path of every admin session.
const SafeSearchPath = "pg_catalog, pg_temp"

// TenantSearchPath is the search_path of the provider's sessions as a
// tenant's role in the tenant's own database.
const TenantSearchPath = "public"

// qHealth reads, in one round trip, what the config health check needs: the
// server version, the admin role's attributes and the session's search_path.
const qHealth = `SELECT pg_catalog.current_setting('server_version'::pg_catalog.text),
  pg_catalog.current_setting('server_version_num'::pg_catalog.text)::pg_catalog.int4,
  r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolinherit,
  pg_catalog.current_setting('search_path'::pg_catalog.text)
FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER`

// qProbeRole is a role name the 16+ preflight creates and rolls back.
const qProbeRole = `provider_postgresql_tenant_probe`

// qProbeMembership16 (16+, inside a transaction that is rolled back): can
// the admin obtain, on a role it creates, the memberships provisioning
// needs? $1 is the probe role's name.
const qProbeMembership16 = `SELECT pg_catalog.pg_has_role(CURRENT_USER, $1::pg_catalog.name, 'USAGE'::pg_catalog.text)
  AND pg_catalog.pg_has_role(CURRENT_USER, $1::pg_catalog.name, 'SET'::pg_catalog.text)`

// observeTemplate reads a tenant's database and role in one round trip. $1
// is the database name, $2 the role name; a missing object gives NULL
// columns. datallowconn is false while provisioning has not finished
// (see qCreateDatabase). PUBLIC's CONNECT comes from the ACL (NULL = the default, which
// grants it); the role's CONNECT must be an explicit grant. @MEMBER@ and
// @ADMIN@ are replaced per server major, @VERIFIER@ by whether the admin
// may read the password verifiers (see qObserve). @GRANTED@ is the same
// membership read from pg_auth_members instead of through the session's
// cached list of its memberships (see asMember): the two differ only in a
// session acting on an outdated list. The last two columns are the access
// other roles have (otherGrantees, @MEMBERS@), as JSON arrays; then the
// role's limits (limitsColumns); then the database attributes its owner
// can change (databaseAttributes).
const observeTemplate = `SELECT d.oid, pg_catalog.pg_get_userbyid(d.datdba), d.datallowconn,
  ` + publicConnect + `,
  ` + roleConnect + `,
  r.oid, r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication, r.rolbypassrls, r.rolconnlimit, r.rolinherit,
  CASE WHEN r.oid IS NULL THEN NULL ELSE @MEMBER@ END,
  CASE WHEN r.oid IS NULL THEN NULL ELSE @ADMIN@ END,
  r.rolvaliduntil::pg_catalog.text,
  @VERIFIER@,
  CASE WHEN r.oid IS NULL THEN NULL ELSE @GRANTED@ END,
  CASE WHEN d.oid IS NULL THEN NULL ELSE ` + otherGrantees + ` END,
  CASE WHEN r.oid IS NULL THEN NULL ELSE @MEMBERS@ END,
  ` + limitsColumns + `,
  ` + databaseAttributes + `
FROM (SELECT 1) AS one
LEFT JOIN pg_catalog.pg_database d ON d.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) $2::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) CURRENT_USER`

// databaseAttributes are the attributes of the database d that its owner
// may change with ALTER DATABASE and that matter beyond its own sessions:
// whether it is a template (any role with CREATEDB may then copy it, and
// it cannot be dropped) and its connection limit (0 keeps the provider's
// login check out). NULL when the database does not exist.
const databaseAttributes = `d.datistemplate, d.datconnlimit`

// Who holds CONNECT on the database d: PUBLIC, and the role r.
const (
	publicConnect = `EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d'::pg_catalog."char", d.datdba))) a
          WHERE a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
            AND a.privilege_type OPERATOR(pg_catalog.=) 'CONNECT'::pg_catalog.text)`
	roleConnect = `EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d'::pg_catalog."char", d.datdba))) a
          WHERE a.grantee OPERATOR(pg_catalog.=) r.oid
            AND a.privilege_type OPERATOR(pg_catalog.=) 'CONNECT'::pg_catalog.text)`
)

// Access to a tenant's database by roles other than its owner, as JSON
// arrays (NULL when there is none). They cost one aclexplode of the
// database's own ACL, and an index scan of pg_auth_members by roleid.
//
// otherGrantees: every role holding a privilege on the database d (its
// ACL) other than PUBLIC (whose CONNECT is its own column), the owner, the
// login role r and the admin adm (whose name is never reported), with the
// privileges it holds and those it may grant onwards. A NULL ACL is the
// default: PUBLIC's and the owner's privileges only.
const otherGrantees = `(SELECT pg_catalog.jsonb_agg(g) FROM (
    SELECT pg_catalog.pg_get_userbyid(a.grantee) AS role,
      pg_catalog.array_agg(a.privilege_type) AS privileges,
      pg_catalog.array_agg(a.privilege_type) FILTER (WHERE a.is_grantable) AS grantable
    FROM pg_catalog.aclexplode(d.datacl) a
    WHERE a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
      AND a.grantee OPERATOR(pg_catalog.<>) d.datdba
      AND a.grantee OPERATOR(pg_catalog.<>) COALESCE(r.oid, 0::pg_catalog.oid)
      AND a.grantee OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
    GROUP BY a.grantee) g)`

// The members of the login role r other than the admin adm, whose own
// membership provisioning needs (and whose name is never reported), with
// the options of their grants: before 16 only ADMIN OPTION exists; from
// 16 on a member may hold several grants (one per grantor), whose options
// add up.
const (
	otherMembersBefore16 = `(SELECT pg_catalog.jsonb_agg(x) FROM (
    SELECT pg_catalog.pg_get_userbyid(m.member) AS role, pg_catalog.bool_or(m.admin_option) AS admin
    FROM pg_catalog.pg_auth_members m
    WHERE m.roleid OPERATOR(pg_catalog.=) r.oid AND m.member OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
    GROUP BY m.member) x)`
	otherMembers16 = `(SELECT pg_catalog.jsonb_agg(x) FROM (
    SELECT pg_catalog.pg_get_userbyid(m.member) AS role, pg_catalog.bool_or(m.admin_option) AS admin,
      pg_catalog.bool_or(m.inherit_option) AS inherit, pg_catalog.bool_or(m.set_option) AS set
    FROM pg_catalog.pg_auth_members m
    WHERE m.roleid OPERATOR(pg_catalog.=) r.oid AND m.member OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
    GROUP BY m.member) x)`
)

// The admin's membership in a tenant role, as provisioning needs it:
// CREATE DATABASE ... OWNER needs to be able to SET ROLE to it; ending its
// sessions, changing CONNECT and dropping its database need its privileges
// (USAGE: membership with INHERIT). Before 16, membership always allows
// SET ROLE; from 16 on, SET is an option of each grant, and the automatic
// grant a CREATEROLE admin gets on roles it creates has neither SET nor
// INHERIT, while pg_has_role(..., 'MEMBER') is already true for it.
const (
	memberBefore16 = `pg_catalog.pg_has_role(CURRENT_USER, r.oid, 'USAGE'::pg_catalog.text)`
	member16       = `(pg_catalog.pg_has_role(CURRENT_USER, r.oid, 'USAGE'::pg_catalog.text)
    AND pg_catalog.pg_has_role(CURRENT_USER, r.oid, 'SET'::pg_catalog.text))`
	// May the admin grant, alter and drop the role? Before 16, CREATEROLE
	// suffices for any role that is not a superuser; from 16 on, it takes
	// ADMIN OPTION on the role (which a role's creator gets automatically).
	//
	// From 16 on, the grant is first looked up directly in
	// pg_auth_members (an index lookup). pg_has_role(..., 'MEMBER WITH
	// ADMIN OPTION') alone walks every role the admin is a member of, at
	// every call (the server caches that walk for the other modes, not
	// for this one), and an admin that created thousands of tenant roles
	// is a member of all of them: 7.6 ms of server CPU per Observe with
	// 3,000, growing faster than the count. It is asked only when there is
	// no direct grant (ADMIN OPTION held through another role); CASE keeps
	// that order.
	adminBefore16 = `(adm.rolsuper OR (adm.rolcreaterole AND NOT r.rolsuper))`
	admin16       = `(adm.rolsuper OR (adm.rolcreaterole AND NOT r.rolsuper AND CASE
    WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m
      WHERE m.roleid OPERATOR(pg_catalog.=) r.oid AND m.member OPERATOR(pg_catalog.=) adm.oid AND m.admin_option) THEN true
    ELSE pg_catalog.pg_has_role(CURRENT_USER, r.oid, 'MEMBER WITH ADMIN OPTION'::pg_catalog.text) END))`
)

// The admin's membership in the tenant role r as pg_auth_members holds it
// (adm is the admin), with the options provisioning grants from 16 on.
const (
	grantedBefore16 = `(adm.rolinherit AND EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m
    WHERE m.roleid OPERATOR(pg_catalog.=) r.oid AND m.member OPERATOR(pg_catalog.=) adm.oid))`
	granted16 = `EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m
    WHERE m.roleid OPERATOR(pg_catalog.=) r.oid AND m.member OPERATOR(pg_catalog.=) adm.oid
      AND m.inherit_option AND m.set_option)`
)

// A digest of the role's password verifier, where the admin may read
// pg_authid (a superuser; never on a managed service): it changes when
// anyone sets the role's password, the role itself included, so a changed
// password is seen in the catalog without logging in. The verifier itself
// never leaves the server. SHA-256, not md5: md5() fails on a server in
// FIPS mode.
const (
	verifierDigest = `(SELECT pg_catalog.sha256(pg_catalog.convert_to(a.rolpassword, 'UTF8'::pg_catalog.name))
    FROM pg_catalog.pg_authid a WHERE a.oid OPERATOR(pg_catalog.=) r.oid)`
	noVerifier = `NULL::pg_catalog.bytea`
)

// qVerifierReadable: may this session read pg_authid?
const qVerifierReadable = `SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid'::pg_catalog.text, 'SELECT'::pg_catalog.text)`

// membersTemplate reads a data role's two login members ($2, $3) in one
// round trip: what RoleAttributesOK and the login fingerprint need, the
// admin's membership (@MEMBER@, @GRANTED@ as in observeTemplate), the
// role's INHERIT attribute and its limits in the database $1. A member
// that does not exist has no row.
const membersTemplate = `SELECT n.i, r.oid, r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication, r.rolbypassrls,
  r.rolconnlimit, r.rolinherit, @MEMBER@, @GRANTED@, r.rolvaliduntil::pg_catalog.text, @VERIFIER@,
  ` + limitsColumns + `
FROM (VALUES (1::pg_catalog.int4, $2::pg_catalog.name), (2::pg_catalog.int4, $3::pg_catalog.name)) AS n(i, name)
JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) n.name
LEFT JOIN pg_catalog.pg_database d ON d.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) CURRENT_USER`

// qMembers returns the members query for a server major version, with the
// verifier digest when the admin may read it.
func qMembers(major int, verifier bool) string {
	versionPoint("qMembers")
	m, v, g := memberBefore16, noVerifier, grantedBefore16
	if major >= 16 {
		m, g = member16, granted16
	}
	if verifier {
		v = verifierDigest
	}
	return strings.NewReplacer("@MEMBER@", m, "@VERIFIER@", v, "@GRANTED@", g).Replace(membersTemplate)
}

// qObserve returns the observe query for a server major version, with the
// verifier digest when the admin may read it.
func qObserve(major int, verifier bool) string {
	versionPoint("qObserve")
	m, a, v, g := memberBefore16, adminBefore16, noVerifier, grantedBefore16
	om := otherMembersBefore16
	if major >= 16 {
		m, a, g = member16, admin16, granted16
		om = otherMembers16
	}
	if verifier {
		v = verifierDigest
	}
	return strings.NewReplacer("@MEMBER@", m, "@ADMIN@", a, "@VERIFIER@", v, "@GRANTED@", g, "@MEMBERS@", om).Replace(observeTemplate)
}

// qAvailableExtensions: for each of $1 the server can install, whether the
// database owner (not a superuser) may create it (its default version is
// trusted or does not need a superuser) and the extensions it requires;
// with the extension allow-lists of managed services on every row (NULL
// where the setting does not exist): Amazon RDS and Aurora
// (rds.allowed_extensions, where "*" or empty allows all), Azure Database
// for PostgreSQL (azure.extensions). An extension the server lacks has no
// row: it is refused as unavailable before any allow-list matters.
const qAvailableExtensions = `SELECT e.name::pg_catalog.text,
  COALESCE(v.trusted OR NOT v.superuser, false),
  COALESCE(v.requires::pg_catalog.text[], '{}'::pg_catalog.text[]),
  pg_catalog.current_setting('rds.allowed_extensions'::pg_catalog.text, true),
  pg_catalog.current_setting('azure.extensions'::pg_catalog.text, true)
FROM pg_catalog.pg_available_extensions e
LEFT JOIN pg_catalog.pg_available_extension_versions v
  ON v.name OPERATOR(pg_catalog.=) e.name AND v.version OPERATOR(pg_catalog.=) e.default_version
WHERE e.name::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])`

// The statements below take identifiers quoted with pgx.Identifier.Sanitize
// after tenancy.ValidateIdentifier; the password is a SCRAM verifier that
// scram.IsVerifier accepted (base64, '$' and ':' only, no quote).
const (
	qCreateRole = `CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '%s'`
	// The admin's membership: before 16 a plain grant (INHERIT comes from
	// the admin's own attribute, which the health check requires); from 16
	// on, the options provisioning needs, explicitly.
	qGrantRoleToAdmin   = `GRANT %s TO CURRENT_USER`
	qGrantRoleToAdmin16 = `GRANT %s TO CURRENT_USER WITH INHERIT TRUE, SET TRUE`
	// qRepairRole sets only what a CREATEROLE (non-superuser) admin may change;
	// SUPERUSER, REPLICATION and BYPASSRLS can only be reset by a superuser.
	// The connection limit is not among them: it is one of the limits
	// (qSetConnectionLimit), set only when managed.
	qRepairRole = `ALTER ROLE %s LOGIN NOCREATEDB NOCREATEROLE`
	// qCreateDatabase: the database, its owner and the options of
	// databaseOptions. It accepts no connection until RestrictConnect has
	// left CONNECT to its owner alone (qAllowConnections).
	qCreateDatabase     = `CREATE DATABASE %s OWNER %s %s ALLOW_CONNECTIONS false`
	qAllowConnections   = `ALTER DATABASE %s ALLOW_CONNECTIONS true`
	qAlterDatabaseOwner = `ALTER DATABASE %s OWNER TO %s`
	qRevokePublic       = `REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC`
	qGrantConnect       = `GRANT CONNECT ON DATABASE %s TO %s`
	qBlockLogins        = `ALTER ROLE %s NOLOGIN CONNECTION LIMIT 0`
	qDropDatabase       = `DROP DATABASE IF EXISTS %s WITH (FORCE)`
	qDropRole           = `DROP ROLE IF EXISTS %s`
	qCreateExtension    = `CREATE EXTENSION IF NOT EXISTS %s`
	qCreateProbeRole    = `CREATE ROLE %s NOLOGIN`
	// qSetRolePassword replaces a role's password with a SCRAM verifier
	// (a credential rotation).
	qSetRolePassword = `ALTER ROLE %s PASSWORD '%s'` //nolint:gosec // a statement template, not a credential
	// A data role's login members: LOGIN with a verifier, inheriting the
	// data role's privileges through their membership; retired, NOLOGIN
	// with no password at all.
	qCreateMember   = `CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD '%s'`
	qSetMemberLogin = `ALTER ROLE %s LOGIN NOCREATEDB NOCREATEROLE INHERIT PASSWORD '%s'`
	qRepairMember   = `ALTER ROLE %s LOGIN NOCREATEDB NOCREATEROLE INHERIT`
	qRetireLogin    = `ALTER ROLE %s NOLOGIN PASSWORD NULL`
	// qRepairGroup: a data role's role, which holds its privileges, gets
	// back what a CREATEROLE admin may reset; its LOGIN is its logins'
	// business (RetireLogin).
	qRepairGroup = `ALTER ROLE %s NOCREATEDB NOCREATEROLE`
	// The membership of a login member in its data role: before 16 a plain
	// grant (inheriting comes from the member's INHERIT attribute); from 16
	// on, WITH INHERIT TRUE explicitly.
	qGrantToMember   = `GRANT %s TO %s`
	qGrantToMember16 = `GRANT %s TO %s WITH INHERIT TRUE`
	// qRepairDatabase gives a database back the attributes a tenant
	// database has: not a template, no connection limit of its own (the
	// login role's connection limit is the one that counts). The owner's
	// privileges suffice, which the admin holds through its membership.
	qRepairDatabase = `ALTER DATABASE %s WITH IS_TEMPLATE false CONNECTION LIMIT -1`
	// qUnmarkTemplate precedes a drop: a template database cannot be
	// dropped.
	qUnmarkTemplate = `ALTER DATABASE %s WITH IS_TEMPLATE false`
)

// qIsTemplate: is database $1 a template? No row when it does not exist.
const qIsTemplate = `SELECT d.datistemplate FROM pg_catalog.pg_database d
WHERE d.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name`

// qTerminateRole ends every session of role $1 except the calling one,
// waiting up to 5 s for each to exit, and counts those signalled.
// pg_terminate_backend raises 42501 when the caller has neither the role's
// privileges nor pg_signal_backend's. The rotation runs it in the
// transaction that sets the role's new password: a session of the role
// altering its own password meanwhile waits for that transaction on the
// role's row and is ended while it waits.
const qTerminateRole = `SELECT pg_catalog.count(*) FILTER (WHERE t.ended)::pg_catalog.int4 FROM (
  SELECT pg_catalog.pg_terminate_backend(a.pid, 5000::pg_catalog.int8) AS ended FROM pg_catalog.pg_stat_activity a
  WHERE a.usename OPERATOR(pg_catalog.=) $1::pg_catalog.name
    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()) t`

// qTerminate ends every other session on database $1 and counts them.
const qTerminate = `SELECT pg_catalog.count(*)::pg_catalog.int4 FROM (
  SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a
  WHERE a.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()) t`

// qExtensions lists the extensions installed in the connected database.
const qExtensions = `SELECT e.extname::pg_catalog.text FROM pg_catalog.pg_extension e`

// qMayReadSystemIdentifier: may the admin execute pg_control_system()?
// PostgreSQL 14 to 18 grant it to PUBLIC by default; a managed service may
// revoke it. Asked first, because a statement naming a function the
// session may not execute fails as a whole.
const qMayReadSystemIdentifier = `SELECT pg_catalog.has_function_privilege('pg_catalog.pg_control_system()'::pg_catalog.text, 'EXECUTE'::pg_catalog.text)`

// qSystemIdentifier reads the cluster's system identifier, chosen by initdb
// and kept by every copy made from the data directory (a restored backup,
// a promoted replica): what tells one server from another behind the same
// address.
const qSystemIdentifier = `SELECT s.system_identifier::pg_catalog.text FROM pg_catalog.pg_control_system() s`

// qMembershipGranted (inside the admin's session, read from the catalog
// table with a plain query): does pg_auth_members hold the admin's
// membership in role $1 as provisioning grants it (granted16,
// grantedBefore16)? Unlike pg_has_role and every privilege check, this
// does not go through the session's cached list of its memberships. No
// row when the role does not exist.
const qMembershipGrantedTemplate = `SELECT @GRANTED@ FROM pg_catalog.pg_roles r, pg_catalog.pg_roles adm
WHERE r.rolname OPERATOR(pg_catalog.=) $1::pg_catalog.name AND adm.rolname OPERATOR(pg_catalog.=) CURRENT_USER`

// qConnectRestricted (in RestrictConnect's transaction, after the REVOKE
// and the GRANT): is CONNECT on database $1 now held by role $2 and no
// longer by PUBLIC? The server answers a REVOKE or GRANT the session may
// not make with a warning, not an error, and changes nothing.
const qConnectRestricted = `SELECT NOT ` + publicConnect + ` AND ` + roleConnect + `
FROM pg_catalog.pg_database d, pg_catalog.pg_roles r
WHERE d.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name AND r.rolname OPERATOR(pg_catalog.=) $2::pg_catalog.name`

// qMembershipGranted returns the membership query for a server major.
func qMembershipGranted(major int) string {
	versionPoint("qMembershipGranted")
	g := grantedBefore16
	if major >= 16 {
		g = granted16
	}
	return strings.Replace(qMembershipGrantedTemplate, "@GRANTED@", g, 1)
}

// qEndForeignSessions (after RestrictConnect's REVOKE and GRANT) ends every
// session on database $1 of a role that does not hold CONNECT on it,
// waiting up to 5 s for each to end, and counts those signalled. A
// superuser holds every privilege, so its sessions are never among them
// (the admin could not end them). A REVOKE ends no session by itself.
const qEndForeignSessions = `SELECT pg_catalog.count(*)::pg_catalog.int4 FROM (
  SELECT pg_catalog.pg_terminate_backend(a.pid, 5000::pg_catalog.int8) FROM pg_catalog.pg_stat_activity a
  WHERE a.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND NOT pg_catalog.has_database_privilege(a.usesysid, a.datid, 'CONNECT'::pg_catalog.text)) t`

// qForeignSessions counts the sessions on database $1 of roles that do not
// hold CONNECT on it (see qEndForeignSessions).
const qForeignSessions = `SELECT pg_catalog.count(*)::pg_catalog.int4 FROM pg_catalog.pg_stat_activity a
WHERE a.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
  AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
  AND NOT pg_catalog.has_database_privilege(a.usesysid, a.datid, 'CONNECT'::pg_catalog.text)`

// Who holds CREATE on the database d: PUBLIC.
const publicCreate = `EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d'::pg_catalog."char", d.datdba))) a
          WHERE a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
            AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text)`

// qTemplates reads what decides whether a tenant could change what new
// databases are copied from: does template0 accept connections, and may
// PUBLIC connect to template1 and create schemas in it? A missing
// template database reads as false.
const qTemplates = `SELECT COALESCE(t0.datallowconn, false),
  COALESCE(` + publicConnect + `, false),
  COALESCE(` + publicCreate + `, false)
FROM (SELECT 1) AS one
LEFT JOIN pg_catalog.pg_database t0 ON t0.datname OPERATOR(pg_catalog.=) 'template0'::pg_catalog.name
LEFT JOIN pg_catalog.pg_database d ON d.datname OPERATOR(pg_catalog.=) 'template1'::pg_catalog.name`

// qDefaultConnect reads, for postgres and template1 (the databases every
// role may connect to by PostgreSQL's default), one row each that exists:
// its name; may PUBLIC connect; may the admin role connect other than
// through PUBLIC (a superuser, or CONNECT held by the admin or by a role
// whose privileges it inherits, the owner's implicit grant included); and
// are the admin's sessions on it?
const qDefaultConnect = `SELECT d.datname::pg_catalog.text,
  ` + publicConnect + `,
  r.rolsuper OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(d.datacl, pg_catalog.acldefault('d'::pg_catalog."char", d.datdba))) a
          WHERE a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
            AND a.privilege_type OPERATOR(pg_catalog.=) 'CONNECT'::pg_catalog.text
            AND pg_catalog.pg_has_role(r.oid, a.grantee, 'USAGE'::pg_catalog.text)),
  d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
FROM pg_catalog.pg_database d, pg_catalog.pg_roles r
WHERE d.datname OPERATOR(pg_catalog.=) ANY ('{postgres,template1}'::pg_catalog.name[])
  AND r.rolname OPERATOR(pg_catalog.=) CURRENT_USER
ORDER BY 1`

// qPublicCreateSchemas (in a session on template1) lists the schemas in
// which PUBLIC may create objects.
const qPublicCreateSchemas = `SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_namespace n
WHERE EXISTS (SELECT 1 FROM pg_catalog.aclexplode(COALESCE(n.nspacl, pg_catalog.acldefault('n'::pg_catalog."char", n.nspowner))) a
  WHERE a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
    AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text)
ORDER BY 1`

// TemplateDatabase is the database every tenant database is copied from:
// template0, which nobody can connect to and so nobody can change, unlike
// template1.
const TemplateDatabase = "template0"

// qTemplateLocale reads template0's locale settings: LC_COLLATE, LC_CTYPE,
// the locale provider (15+), the provider's locale (ICU, 15+; or builtin,
// 17+) and ICU rules (16+). @PROVIDER@, @LOCALE@ and @RULES@ are replaced
// per server major (qTemplateLocaleFor).
const qTemplateLocale = `SELECT d.datcollate::pg_catalog.text, d.datctype::pg_catalog.text,
  @PROVIDER@, @LOCALE@, @RULES@
FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) 'template0'::pg_catalog.name`

// qTemplateLocaleFor returns qTemplateLocale for a server major.
func qTemplateLocaleFor(major int) string {
	versionPoint("qTemplateLocaleFor")
	prov, loc, rules := `'c'::pg_catalog.text`, `NULL::pg_catalog.text`, `NULL::pg_catalog.text`
	if major >= 15 {
		prov, loc = `d.datlocprovider::pg_catalog.text`, `d.daticulocale::pg_catalog.text`
	}
	if major >= 16 {
		rules = `d.daticurules::pg_catalog.text`
	}
	if major >= 17 {
		loc = `d.datlocale::pg_catalog.text`
	}
	return strings.NewReplacer("@PROVIDER@", prov, "@LOCALE@", loc, "@RULES@", rules).Replace(qTemplateLocale)
}

// Locale is the encoding-independent locale of a new database.
type Locale struct {
	// Encoding is the database's encoding ("" is DatabaseEncoding).
	Encoding string
	// Collate and Ctype are LC_COLLATE and LC_CTYPE.
	Collate, Ctype string
	// Provider is pg_database.datlocprovider: "c" (libc), "i" (ICU) or "b"
	// (builtin, 17+).
	Provider string
	// Locale is the ICU or builtin locale ("" for libc).
	Locale string
	// ICURules are ICU tailoring rules (16+, "" for none).
	ICURules string
}

// DatabaseEncoding is the encoding of a tenant database that asks none.
const DatabaseEncoding = "UTF8"

// databaseOptions is the clause of CREATE DATABASE that fixes what a new
// database is copied from and its encoding and locale, so that nothing
// depends on what template1 holds: TEMPLATE template0, the encoding of l
// (UTF8 when it has none) and the locale l, for a server major. It is the
// one place these options are built.
func databaseOptions(l Locale, major int) (string, error) {
	versionPoint("databaseOptions")
	var b strings.Builder
	b.WriteString("TEMPLATE " + TemplateDatabase)
	opt := func(name, value string) error {
		v, err := sqlString(name, value)
		if err != nil {
			return err
		}
		b.WriteString(" " + name + " " + v)
		return nil
	}
	enc := l.Encoding
	if enc == "" {
		enc = DatabaseEncoding
	}
	if err := opt("ENCODING", enc); err != nil {
		return "", err
	}
	if err := opt("LC_COLLATE", l.Collate); err != nil {
		return "", err
	}
	if err := opt("LC_CTYPE", l.Ctype); err != nil {
		return "", err
	}
	if major < 15 {
		if l.Provider != "" && l.Provider != "c" {
			return "", fmt.Errorf("locale provider %q on PostgreSQL %d", l.Provider, major)
		}
		return b.String(), nil
	}
	switch l.Provider {
	case "c":
		b.WriteString(" LOCALE_PROVIDER libc")
	case "i":
		b.WriteString(" LOCALE_PROVIDER icu")
		if err := opt("ICU_LOCALE", l.Locale); err != nil {
			return "", err
		}
		if l.ICURules != "" && major >= 16 {
			if err := opt("ICU_RULES", l.ICURules); err != nil {
				return "", err
			}
		}
	case "b":
		if major < 17 {
			return "", fmt.Errorf("locale provider builtin on PostgreSQL %d", major)
		}
		b.WriteString(" LOCALE_PROVIDER builtin")
		if err := opt("BUILTIN_LOCALE", l.Locale); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("unknown locale provider %q", l.Provider)
	}
	return b.String(), nil
}

// sqlString quotes a value read from the catalog as a string literal for
// a statement option (options take no parameters): quotes doubled; a
// backslash or control character (whose meaning would depend on
// standard_conforming_strings) and an empty value are refused.
func sqlString(name, v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("%s is empty", name)
	}
	for _, r := range v {
		if r == '\\' || r < ' ' || r == 0x7f {
			return "", fmt.Errorf("%s %q contains a backslash or a control character", name, v)
		}
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
}

// Tenant limits: a login role's connection limit and its role-level
// defaults of the allow-listed session settings (tenancy.LimitSettings).

// limitsColumns are the observe query's last columns: the login role r's
// CONNECTION LIMIT is read with its attributes; these are its defaults in
// every database and in its own database d (pg_db_role_setting.setconfig,
// "name=value" entries; NULL when none).
const limitsColumns = `CASE WHEN r.oid IS NULL THEN NULL ELSE (SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s
    WHERE s.setrole OPERATOR(pg_catalog.=) r.oid AND s.setdatabase OPERATOR(pg_catalog.=) 0::pg_catalog.oid) END,
  CASE WHEN r.oid IS NULL OR d.oid IS NULL THEN NULL ELSE (SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s
    WHERE s.setrole OPERATOR(pg_catalog.=) r.oid AND s.setdatabase OPERATOR(pg_catalog.=) d.oid) END`

// Statements that set limits. The role and database are quoted with
// pgx.Identifier.Sanitize after tenancy.ValidateIdentifier; the setting
// name is one of tenancy.LimitSettings (a constant); the value passed
// tenancy.ValidateSetting (digits and a unit) and is quoted by sqlString.
// The connection limit is an integer.
const (
	qCreateRoleConnectionLimit = ` CONNECTION LIMIT %d`
	qSetConnectionLimit        = `ALTER ROLE %s CONNECTION LIMIT %d`
	qSetRoleSetting            = `ALTER ROLE %s SET %s TO %s`
	qResetRoleSettingInDB      = `ALTER ROLE %s IN DATABASE %s RESET %s`
)

// qTenantConnections reads max_connections, superuser_reserved_connections
// and reserved_connections (16+; 0 before).
const qTenantConnections = `SELECT pg_catalog.current_setting('max_connections'::pg_catalog.text)::pg_catalog.int4,
  pg_catalog.current_setting('superuser_reserved_connections'::pg_catalog.text)::pg_catalog.int4,
  COALESCE(pg_catalog.current_setting('reserved_connections'::pg_catalog.text, true)::pg_catalog.int4, 0::pg_catalog.int4)`

// qConnectionBudget reads, for the config's ConnectionBudget condition,
// max_connections, superuser_reserved_connections, reserved_connections
// (16+; 0 before), and, over the login roles other than superusers that
// the admin is a member of (the roles it provisioned), the sum of their
// connection limits, how many have none, and how many there are. The
// roles are found from the admin's memberships (an index scan of
// pg_auth_members by member), not by scanning every role.
const qConnectionBudget = `SELECT pg_catalog.current_setting('max_connections'::pg_catalog.text)::pg_catalog.int4,
  pg_catalog.current_setting('superuser_reserved_connections'::pg_catalog.text)::pg_catalog.int4,
  COALESCE(pg_catalog.current_setting('reserved_connections'::pg_catalog.text, true)::pg_catalog.int4, 0::pg_catalog.int4),
  COALESCE(pg_catalog.sum(r.rolconnlimit) FILTER (WHERE r.rolconnlimit OPERATOR(pg_catalog.>=) 0::pg_catalog.int4), 0::pg_catalog.int8)::pg_catalog.int8,
  pg_catalog.count(*) FILTER (WHERE r.rolconnlimit OPERATOR(pg_catalog.<) 0::pg_catalog.int4)::pg_catalog.int4,
  pg_catalog.count(*)::pg_catalog.int4
FROM pg_catalog.pg_roles r
WHERE r.rolcanlogin AND NOT r.rolsuper
  AND r.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
  AND r.oid OPERATOR(pg_catalog.=) ANY (SELECT m.roleid FROM pg_catalog.pg_auth_members m, pg_catalog.pg_roles adm
    WHERE adm.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND m.member OPERATOR(pg_catalog.=) adm.oid)`

// Database options (encoding and locale) and database sizes.

// qDatabaseLocale reads one database's encoding and locale settings, as
// qTemplateLocale does template0's; $1 is the database name. No row when
// it does not exist.
const qDatabaseLocale = `SELECT pg_catalog.pg_encoding_to_char(d.encoding)::pg_catalog.text,
  d.datcollate::pg_catalog.text, d.datctype::pg_catalog.text,
  @PROVIDER@, @LOCALE@
FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name`

// qDatabaseLocaleFor returns qDatabaseLocale for a server major.
func qDatabaseLocaleFor(major int) string {
	versionPoint("qDatabaseLocaleFor")
	prov, loc := `'c'::pg_catalog.text`, `NULL::pg_catalog.text`
	if major >= 15 {
		prov, loc = `d.datlocprovider::pg_catalog.text`, `d.daticulocale::pg_catalog.text`
	}
	if major >= 17 {
		loc = `d.datlocale::pg_catalog.text`
	}
	return strings.NewReplacer("@PROVIDER@", prov, "@LOCALE@", loc).Replace(qDatabaseLocale)
}

// qOptionsSupport answers, in one round trip, whether the server supports
// the options a new database asks: $1 the encoding (pg_char_to_encoding
// knows it), $2 the libc locale (C and POSIX always exist; any other must
// be one of the server's libc collations, compared without case and '-',
// as C.UTF-8 and C.utf8 name the same locale, and usable with the
// encoding), $3 the ICU locale (one of its ICU collations), $4 the builtin
// locale (one of its builtin collations, 17+). A NULL parameter is not
// asked and answers true. @ICU@ and @BUILTIN@ are replaced per major
// (qOptionsSupportFor); the locale column of pg_collation is collcollate
// on 14, colliculocale on 15 and 16, colllocale from 17 on.
const qOptionsSupport = `SELECT
  $1::pg_catalog.text IS NULL OR pg_catalog.pg_char_to_encoding($1::pg_catalog.name) OPERATOR(pg_catalog.>=) 0::pg_catalog.int4,
  $2::pg_catalog.text IS NULL OR $2::pg_catalog.text OPERATOR(pg_catalog.=) ANY ('{C,POSIX}'::pg_catalog.text[]) OR EXISTS (
    SELECT 1 FROM pg_catalog.pg_collation c
    WHERE c.collprovider OPERATOR(pg_catalog.=) 'c'::pg_catalog."char"
      AND pg_catalog.lower(pg_catalog.replace(c.collcollate::pg_catalog.text, '-'::pg_catalog.text, ''::pg_catalog.text))
        OPERATOR(pg_catalog.=) pg_catalog.lower(pg_catalog.replace($2::pg_catalog.text, '-'::pg_catalog.text, ''::pg_catalog.text))
      AND c.collencoding OPERATOR(pg_catalog.=) ANY (ARRAY[-1::pg_catalog.int4,
        pg_catalog.pg_char_to_encoding(COALESCE($1::pg_catalog.text, 'UTF8'::pg_catalog.text)::pg_catalog.name)])),
  $3::pg_catalog.text IS NULL OR EXISTS (
    SELECT 1 FROM pg_catalog.pg_collation c
    WHERE c.collprovider OPERATOR(pg_catalog.=) 'i'::pg_catalog."char" AND @ICU@::pg_catalog.text OPERATOR(pg_catalog.=) $3::pg_catalog.text),
  $4::pg_catalog.text IS NULL OR @BUILTIN@`

// qOptionsSupportFor returns qOptionsSupport for a server major.
func qOptionsSupportFor(major int) string {
	versionPoint("qOptionsSupportFor")
	icu, builtin := `c.collcollate`, `false`
	if major >= 15 {
		icu = `c.colliculocale`
	}
	if major >= 17 {
		icu = `c.colllocale`
		builtin = `EXISTS (SELECT 1 FROM pg_catalog.pg_collation c
    WHERE c.collprovider OPERATOR(pg_catalog.=) 'b'::pg_catalog."char" AND c.colllocale::pg_catalog.text OPERATOR(pg_catalog.=) $4::pg_catalog.text)`
	}
	return strings.NewReplacer("@ICU@", icu, "@BUILTIN@", builtin).Replace(qOptionsSupport)
}

// qSetLocalStatementTimeout bounds the statements of the current
// transaction on the server ($1 in milliseconds); it ends with the
// transaction.
const qSetLocalStatementTimeout = `SELECT pg_catalog.set_config('statement_timeout'::pg_catalog.text, $1::pg_catalog.text, true)`

// qDatabaseSizes measures, in one statement, the size of each database of
// $1 that exists and that the admin may measure (pg_database_size needs
// CONNECT on the database, which the admin holds through its membership
// in each tenant role, or pg_read_all_stats): one row per database. The
// server stats every file of every database measured: the cost grows with
// the number of files, not their size (performance.md).
const qDatabaseSizes = `SELECT d.datname::pg_catalog.text, pg_catalog.pg_database_size(d.oid)
FROM pg_catalog.pg_database d
WHERE d.datname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]::pg_catalog.name[])
  AND (pg_catalog.has_database_privilege(d.oid, 'CONNECT'::pg_catalog.text)
    OR pg_catalog.pg_has_role(CURRENT_USER, 'pg_read_all_stats'::pg_catalog.name, 'USAGE'::pg_catalog.text))`

// Sessions the provider opens on a database other than the admin's own
// (a tenant's, as the tenant's role or as the admin for an access
// cleanup; template1) run where someone else may have set defaults for
// every session (ALTER DATABASE ... SET, which a tenant may do as its
// database's owner) and for a role there (ALTER ROLE ... IN DATABASE ...
// SET, which a tenant may do for its own role). Startup parameters
// override both, so every such session starts with these: nothing set
// there decides what name resolves to which object, makes the session
// read-only, or bounds a statement or a transaction. search_path is set
// per session (SafeSearchPath, TenantSearchPath). The admin pool, on the
// admin's own database, pins only its search_path: the settings of that
// database and of the admin role are the platform admin's.
var pinnedSettings = map[string]string{
	"default_transaction_read_only":       "off",
	"default_transaction_isolation":       "read committed",
	"default_transaction_deferrable":      "off",
	"statement_timeout":                   "0",
	"lock_timeout":                        "0",
	"idle_in_transaction_session_timeout": "0",
	"idle_session_timeout":                "0",
	"exit_on_error":                       "off",
	"standard_conforming_strings":         "on",
	"row_security":                        "on",
	"check_function_bodies":               "on",
}

// PinnedSettings returns the startup parameters of every provider session
// on a server major: pinnedSettings, plus transaction_timeout from 17 on
// (an older server refuses a startup parameter it does not know), with
// searchPath.
func PinnedSettings(major int, searchPath string) map[string]string {
	versionPoint("PinnedSettings")
	m := make(map[string]string, len(pinnedSettings)+2)
	for k, v := range pinnedSettings {
		m[k] = v
	}
	if major >= 17 {
		m["transaction_timeout"] = "0"
	}
	m["search_path"] = searchPath
	return m
}

// Access cleanup (Pool.CleanupAccess). The server-wide steps run on the
// admin pool; the steps inside the tenant's database run in one admin
// session on that database, started with PinnedSettings and then SET ROLE
// to the login role (qSetRole), so whatever they run, runs with the
// tenant's privileges. In that session SESSION_USER is the admin and
// CURRENT_USER the login role. Names read from the catalog are quoted in
// Go (pgx.Identifier.Sanitize), never by the server.

// qSetRole: the in-database session acts as the login role (quoted).
const qSetRole = `SET ROLE %s`

// qCleanupDatabaseGrantees lists the roles holding a privilege on database
// $1 other than PUBLIC, the owner, the login role $2 and the admin, each
// with whether it is one of the roles $3 to keep (the Database's own data
// roles). A kept role's CONNECT without grant option is not listed: it is
// what the provider granted; anything more it holds is.
const qCleanupDatabaseGrantees = `SELECT DISTINCT pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text,
  (pg_catalog.pg_get_userbyid(a.grantee) OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.name[]))::pg_catalog.text
FROM pg_catalog.pg_database d
CROSS JOIN pg_catalog.aclexplode(d.datacl) a
LEFT JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) $2::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
WHERE d.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
  AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
  AND a.grantee OPERATOR(pg_catalog.<>) d.datdba
  AND a.grantee OPERATOR(pg_catalog.<>) COALESCE(r.oid, 0::pg_catalog.oid)
  AND a.grantee OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
  AND NOT (pg_catalog.pg_get_userbyid(a.grantee) OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.name[])
    AND a.privilege_type OPERATOR(pg_catalog.=) 'CONNECT'::pg_catalog.text AND NOT a.is_grantable)
ORDER BY 1`

// qRevokeDatabase revokes every privilege of a role on the database, and
// what it granted onwards (database and role quoted).
const qRevokeDatabase = `REVOKE ALL ON DATABASE %s FROM %s CASCADE`

// qRevokeDatabaseExtra and qRevokeConnectOption revoke from a kept role
// what it holds on the database beyond CONNECT (database and role
// quoted).
const (
	qRevokeDatabaseExtra = `REVOKE CREATE, TEMPORARY ON DATABASE %s FROM %s CASCADE`
	qRevokeConnectOption = `REVOKE GRANT OPTION FOR CONNECT ON DATABASE %s FROM %s CASCADE`
)

// qCleanupMembers lists the grants of the login role $1 to roles other
// than the admin: the member and the grantor (before 16 the grantor is
// not kept reliably and is not used).
const qCleanupMembers = `SELECT pg_catalog.pg_get_userbyid(m.member)::pg_catalog.text, COALESCE(pg_catalog.pg_get_userbyid(m.grantor)::pg_catalog.text, ''::pg_catalog.text)
FROM pg_catalog.pg_auth_members m
JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
WHERE r.rolname OPERATOR(pg_catalog.=) $1::pg_catalog.name
  AND m.member OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
ORDER BY 1, 2`

// Revoking a membership (role, member and grantor quoted): from 16 on per
// grantor, which takes the grantor's privileges.
const (
	qRevokeMember   = `REVOKE %s FROM %s CASCADE`
	qRevokeMember16 = `REVOKE %s FROM %s GRANTED BY %s CASCADE`
)

// qCleanupDefaultACL (inside the database, as the login role $1 by SET
// ROLE) lists the default privileges granted to roles other than PUBLIC,
// the role they are set for, the login role, the admin and the roles $2 to
// keep: whether the entry is the login role's own, the role it is for, its
// schema ("" for all), its object kind (pg_default_acl.defaclobjtype) and
// the grantee.
const qCleanupDefaultACL = `SELECT DISTINCT da.defaclrole OPERATOR(pg_catalog.=) r.oid,
  pg_catalog.pg_get_userbyid(da.defaclrole)::pg_catalog.text,
  COALESCE(n.nspname::pg_catalog.text, ''::pg_catalog.text),
  da.defaclobjtype::pg_catalog.text,
  pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text
FROM pg_catalog.pg_default_acl da
CROSS JOIN pg_catalog.aclexplode(da.defaclacl) a
JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) $1::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) da.defaclnamespace
WHERE a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
  AND a.grantee OPERATOR(pg_catalog.<>) da.defaclrole
  AND a.grantee OPERATOR(pg_catalog.<>) r.oid
  AND a.grantee OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
  AND NOT pg_catalog.pg_get_userbyid(a.grantee) OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.name[])
ORDER BY 2, 3, 4, 5`

// qRevokeDefaultACL removes default privileges (for-role, " IN SCHEMA
// <schema>" or "", object kind keyword, grantee; names quoted).
const qRevokeDefaultACL = `ALTER DEFAULT PRIVILEGES FOR ROLE %s%s REVOKE ALL ON %s FROM %s CASCADE`

// qCleanupObjectGrants (inside the database) lists the privileges roles
// other than the login role $1, the admin and the roles $2 to keep hold on objects of this
// database (pg_shdepend, deptype 'a'; PUBLIC is never recorded there):
// the object's kind, its schema, name and column, a routine's argument
// types (schemas and names), a large object's OID, the grantee and a
// description for reports. Default privileges are qCleanupDefaultACL's.
const qCleanupObjectGrants = `SELECT
  CASE
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND s.objsubid OPERATOR(pg_catalog.=) 0::pg_catalog.int4 THEN 'table'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass THEN 'column'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass THEN 'schema'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass THEN 'routine'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass THEN 'type'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_largeobject'::pg_catalog.regclass THEN 'large object'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_language'::pg_catalog.regclass THEN 'language'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass THEN 'foreign data wrapper'
    WHEN s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_server'::pg_catalog.regclass THEN 'foreign server'
    ELSE ''
  END::pg_catalog.text,
  COALESCE(cn.nspname, pn.nspname, tn.nspname, sn.nspname, ''::pg_catalog.name)::pg_catalog.text,
  COALESCE(c.relname, p.proname, t.typname, l.lanname, w.fdwname, fs.srvname, ''::pg_catalog.name)::pg_catalog.text,
  COALESCE(att.attname, ''::pg_catalog.name)::pg_catalog.text,
  COALESCE((SELECT pg_catalog.array_agg(xn.nspname::pg_catalog.text ORDER BY x.n) FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) WITH ORDINALITY AS x(t, n)
    JOIN pg_catalog.pg_type xt ON xt.oid OPERATOR(pg_catalog.=) x.t JOIN pg_catalog.pg_namespace xn ON xn.oid OPERATOR(pg_catalog.=) xt.typnamespace), '{}'::pg_catalog.text[]),
  COALESCE((SELECT pg_catalog.array_agg(xt.typname::pg_catalog.text ORDER BY x.n) FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) WITH ORDINALITY AS x(t, n)
    JOIN pg_catalog.pg_type xt ON xt.oid OPERATOR(pg_catalog.=) x.t), '{}'::pg_catalog.text[]),
  s.objid::pg_catalog.int8,
  pg_catalog.pg_get_userbyid(s.refobjid)::pg_catalog.text,
  COALESCE(pg_catalog.pg_describe_object(s.classid, s.objid, s.objsubid), ''::pg_catalog.text)
FROM pg_catalog.pg_shdepend s
JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) s.dbid AND d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) $1::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
LEFT JOIN pg_catalog.pg_class c ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid OPERATOR(pg_catalog.=) s.objid
LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid OPERATOR(pg_catalog.=) c.relnamespace
LEFT JOIN pg_catalog.pg_attribute att ON c.oid IS NOT NULL AND s.objsubid OPERATOR(pg_catalog.<>) 0::pg_catalog.int4
  AND att.attrelid OPERATOR(pg_catalog.=) c.oid AND att.attnum OPERATOR(pg_catalog.=) s.objsubid::pg_catalog.int2
LEFT JOIN pg_catalog.pg_namespace sn ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass AND sn.oid OPERATOR(pg_catalog.=) s.objid
LEFT JOIN pg_catalog.pg_proc p ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid OPERATOR(pg_catalog.=) s.objid
LEFT JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.pronamespace
LEFT JOIN pg_catalog.pg_type t ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid OPERATOR(pg_catalog.=) s.objid
LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.typnamespace
LEFT JOIN pg_catalog.pg_language l ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_language'::pg_catalog.regclass AND l.oid OPERATOR(pg_catalog.=) s.objid
LEFT JOIN pg_catalog.pg_foreign_data_wrapper w ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass AND w.oid OPERATOR(pg_catalog.=) s.objid
LEFT JOIN pg_catalog.pg_foreign_server fs ON s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_server'::pg_catalog.regclass AND fs.oid OPERATOR(pg_catalog.=) s.objid
WHERE s.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
  AND s.deptype OPERATOR(pg_catalog.=) 'a'::pg_catalog."char"
  AND s.classid OPERATOR(pg_catalog.<>) 'pg_catalog.pg_default_acl'::pg_catalog.regclass
  AND s.refobjid OPERATOR(pg_catalog.<>) r.oid
  AND s.refobjid OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
  AND NOT pg_catalog.pg_get_userbyid(s.refobjid) OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.name[])
ORDER BY 9, 8`

// Revoking a role's privileges on one object and what it granted onwards
// (object and grantee quoted; a column, a routine's argument list or a
// large object's OID as noted).
const (
	qRevokeTable       = `REVOKE ALL ON TABLE %s FROM %s CASCADE`
	qRevokeColumn      = `REVOKE ALL (%s) ON TABLE %s FROM %s CASCADE`
	qRevokeSchema      = `REVOKE ALL ON SCHEMA %s FROM %s CASCADE`
	qRevokeRoutine     = `REVOKE ALL ON ROUTINE %s(%s) FROM %s CASCADE`
	qRevokeType        = `REVOKE ALL ON TYPE %s FROM %s CASCADE`
	qRevokeLargeObject = `REVOKE ALL ON LARGE OBJECT %d FROM %s CASCADE`
	qRevokeLanguage    = `REVOKE ALL ON LANGUAGE %s FROM %s CASCADE`
	qRevokeFDW         = `REVOKE ALL ON FOREIGN DATA WRAPPER %s FROM %s CASCADE`
	qRevokeServer      = `REVOKE ALL ON FOREIGN SERVER %s FROM %s CASCADE`
)

// qCleanupForeignOwned (inside the database) lists objects of this
// database owned by roles other than the login role $1 and the admin (at
// most 21): the cleanup reports them and leaves them alone.
const qCleanupForeignOwned = `SELECT COALESCE(pg_catalog.pg_describe_object(s.classid, s.objid, s.objsubid), ''::pg_catalog.text),
  pg_catalog.pg_get_userbyid(s.refobjid)::pg_catalog.text
FROM pg_catalog.pg_shdepend s
JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) s.dbid AND d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) $1::pg_catalog.name
LEFT JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
WHERE s.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
  AND s.deptype OPERATOR(pg_catalog.=) 'o'::pg_catalog."char"
  AND s.refobjid OPERATOR(pg_catalog.<>) r.oid
  AND s.refobjid OPERATOR(pg_catalog.<>) COALESCE(adm.oid, 0::pg_catalog.oid)
ORDER BY 2, 1
LIMIT 21`

// qCleanupEndSessions ends the client sessions on database $1 of roles
// other than the login role $2, the roles $3 to keep and the admin that
// the admin may signal
// (it holds their privileges or pg_signal_backend's, and they are no
// superuser unless it is one), waiting up to 5 s for each, and counts
// those ended.
const qCleanupEndSessions = `SELECT pg_catalog.count(*) FILTER (WHERE t.ended)::pg_catalog.int4 FROM (
  SELECT pg_catalog.pg_terminate_backend(a.pid, 5000::pg_catalog.int8) AS ended
  FROM pg_catalog.pg_stat_activity a
  JOIN pg_catalog.pg_roles u ON u.oid OPERATOR(pg_catalog.=) a.usesysid
  JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
  WHERE a.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND u.rolname OPERATOR(pg_catalog.<>) $2::pg_catalog.name
    AND NOT u.rolname OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.name[])
    AND u.oid OPERATOR(pg_catalog.<>) adm.oid
    AND (NOT u.rolsuper OR adm.rolsuper)
    AND (pg_catalog.pg_has_role(SESSION_USER, u.oid, 'USAGE'::pg_catalog.text)
      OR pg_catalog.pg_has_role(SESSION_USER, 'pg_signal_backend'::pg_catalog.name, 'USAGE'::pg_catalog.text))) t`

// qCleanupSessionsLeft lists the roles other than the login role $2, the
// roles $3 to keep and the admin with sessions on database $1, whether
// each is a superuser,
// and how many sessions it has.
const qCleanupSessionsLeft = `SELECT u.rolname::pg_catalog.text, u.rolsuper, pg_catalog.count(*)::pg_catalog.int4
FROM pg_catalog.pg_stat_activity a
JOIN pg_catalog.pg_roles u ON u.oid OPERATOR(pg_catalog.=) a.usesysid
JOIN pg_catalog.pg_roles adm ON adm.rolname OPERATOR(pg_catalog.=) SESSION_USER
WHERE a.datname OPERATOR(pg_catalog.=) $1::pg_catalog.name
  AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
  AND u.rolname OPERATOR(pg_catalog.<>) $2::pg_catalog.name
  AND NOT u.rolname OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.name[])
  AND u.oid OPERATOR(pg_catalog.<>) adm.oid
GROUP BY u.rolname, u.rolsuper
ORDER BY 1`

// Access roles (Pool.GrantAccess, Pool.ObserveAccess): login roles beside a
// database's owner that may use its data but own nothing. The statements
// run in one admin session on the tenant's database, started with
// PinnedSettings and then SET ROLE to the owner (qSetRole): every grant is
// the owner's, on the owner's objects, so the admin needs no privilege on
// them. Names are quoted in Go (pgx.Identifier.Sanitize).

// qAccessSchemaFilter selects (on pg_namespace n) the schemas whose
// objects the owner's grants cover: those the current role (the owner)
// owns or whose owning role it has the privileges of (public, owned by
// pg_database_owner from 15 on), and those it owns a table, sequence or
// routine in (public before 15, owned by the bootstrap superuser), leaving
// out the system schemas.
const qAccessSchemaFilter = `(pg_catalog.pg_has_role(CURRENT_USER, n.nspowner, 'USAGE'::pg_catalog.text)
    OR EXISTS (SELECT FROM pg_catalog.pg_class c
      WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid
        AND c.relowner OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER))
    OR EXISTS (SELECT FROM pg_catalog.pg_proc f
      WHERE f.pronamespace OPERATOR(pg_catalog.=) n.oid
        AND f.proowner OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)))
  AND n.nspname OPERATOR(pg_catalog.!~) '^pg_'::pg_catalog.text
  AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'::pg_catalog.name`

// qAccessSchemas lists the schemas qAccessSchemaFilter selects.
const qAccessSchemas = `SELECT n.nspname::pg_catalog.text
FROM pg_catalog.pg_namespace n
WHERE ` + qAccessSchemaFilter + `
ORDER BY 1`

// qAccessPublicCreate lists the schemas of the database (but the system
// ones) where PUBLIC may CREATE (public in a database copied from
// template0 on 14 and before, or a grant of the owner's), and whether the
// owner (the current role) may change that: an access role must create
// nothing, and PUBLIC's privileges are every role's.
const qAccessPublicCreate = `SELECT n.nspname::pg_catalog.text,
  pg_catalog.pg_has_role(CURRENT_USER, n.nspowner, 'USAGE'::pg_catalog.text)
FROM pg_catalog.pg_namespace n
WHERE n.nspname OPERATOR(pg_catalog.!~) '^pg_'::pg_catalog.text
  AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'::pg_catalog.name
  AND EXISTS (SELECT FROM pg_catalog.aclexplode(n.nspacl) x
    WHERE x.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
      AND x.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text)
ORDER BY 1`

// qAccessRevokePublicCreate takes CREATE on a schema (quoted) from PUBLIC.
const qAccessRevokePublicCreate = `REVOKE CREATE ON SCHEMA %s FROM PUBLIC`

// qAccessOwnerCreate gives the owner (quoted) CREATE on a schema (quoted)
// it does not own, before PUBLIC loses it: on 14 and before, the owner of
// a database creates in its public schema only through PUBLIC.
const qAccessOwnerCreate = `GRANT USAGE, CREATE ON SCHEMA %s TO %s`

// qResetRole ends a SET ROLE: the session acts as the admin again.
const qResetRole = `RESET ROLE`

// Grants to an access role (privileges from Access.privileges; schema,
// role and database quoted). ON ALL ... IN SCHEMA covers what exists now;
// the default privileges FOR ROLE the owner (in no particular schema)
// cover what the owner creates later anywhere, schemas included.
const (
	qAccessConnect          = `GRANT CONNECT ON DATABASE %s TO %s`
	qAccessSchemaUsage      = `GRANT USAGE ON SCHEMA %s TO %s`
	qAccessTables           = `GRANT %s ON ALL TABLES IN SCHEMA %s TO %s`
	qAccessSequences        = `GRANT %s ON ALL SEQUENCES IN SCHEMA %s TO %s`
	qAccessRoutines         = `GRANT %s ON ALL ROUTINES IN SCHEMA %s TO %s`
	qAccessDefaultTables    = `ALTER DEFAULT PRIVILEGES FOR ROLE %s GRANT %s ON TABLES TO %s`
	qAccessDefaultSequences = `ALTER DEFAULT PRIVILEGES FOR ROLE %s GRANT %s ON SEQUENCES TO %s`
	qAccessDefaultRoutines  = `ALTER DEFAULT PRIVILEGES FOR ROLE %s GRANT %s ON FUNCTIONS TO %s`
	qAccessDefaultSchemas   = `ALTER DEFAULT PRIVILEGES FOR ROLE %s GRANT USAGE ON SCHEMAS TO %s`
)

// Revokes from a data role being removed (Pool.RevokeAccess): everything
// the owner granted it, on the database, in each schema and in the
// owner's default privileges, so that DROP ROLE finds nothing that depends
// on it. CASCADE takes along what the role granted on from a grant option.
const (
	qRevokeConnect          = `REVOKE ALL ON DATABASE %s FROM %s CASCADE`
	qRevokeTables           = `REVOKE ALL ON ALL TABLES IN SCHEMA %s FROM %s CASCADE`
	qRevokeSequences        = `REVOKE ALL ON ALL SEQUENCES IN SCHEMA %s FROM %s CASCADE`
	qRevokeRoutines         = `REVOKE ALL ON ALL ROUTINES IN SCHEMA %s FROM %s CASCADE`
	qRevokeDefaultTables    = `ALTER DEFAULT PRIVILEGES FOR ROLE %s REVOKE ALL ON TABLES FROM %s CASCADE`
	qRevokeDefaultSequences = `ALTER DEFAULT PRIVILEGES FOR ROLE %s REVOKE ALL ON SEQUENCES FROM %s CASCADE`
	qRevokeDefaultRoutines  = `ALTER DEFAULT PRIVILEGES FOR ROLE %s REVOKE ALL ON FUNCTIONS FROM %s CASCADE`
	qRevokeDefaultSchemas   = `ALTER DEFAULT PRIVILEGES FOR ROLE %s REVOKE ALL ON SCHEMAS FROM %s CASCADE`
)

// qAccessMissing lists what the access role $1 lacks of what its access
// grants, one line per missing privilege: CONNECT on the database, USAGE
// on the owner's schemas (qAccessSchemas), the table ($2), sequence ($3)
// and routine ($4) privileges on the objects the owner owns in them, and
// the owner's default privileges for each kind (table 'r', sequence 'S',
// function 'f', schema 'n'), and CREATE it holds on any schema of the
// database (through PUBLIC, as on 14). It runs as the owner, in its
// database.
const qAccessMissing = `WITH me AS (
  SELECT r.oid AS owner, a.oid AS grantee FROM pg_catalog.pg_roles r, pg_catalog.pg_roles a
  WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND a.rolname OPERATOR(pg_catalog.=) $1::pg_catalog.name
), schemas AS (
  SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n
  WHERE ` + qAccessSchemaFilter + `
), wanted(kind, privilege) AS (
  SELECT 'r'::pg_catalog.text, p FROM pg_catalog.unnest($2::pg_catalog.text[]) p
  UNION ALL SELECT 'S'::pg_catalog.text, p FROM pg_catalog.unnest($3::pg_catalog.text[]) p
  UNION ALL SELECT 'f'::pg_catalog.text, p FROM pg_catalog.unnest($4::pg_catalog.text[]) p
  UNION ALL SELECT 'n'::pg_catalog.text, 'USAGE'::pg_catalog.text
)
SELECT 'database: CONNECT'::pg_catalog.text
WHERE NOT pg_catalog.has_database_privilege($1::pg_catalog.name, pg_catalog.current_database(), 'CONNECT'::pg_catalog.text)
UNION ALL
SELECT pg_catalog.format('schema %I: USAGE'::pg_catalog.text, s.nspname)
FROM schemas s WHERE NOT pg_catalog.has_schema_privilege($1::pg_catalog.name, s.oid, 'USAGE'::pg_catalog.text)
UNION ALL
SELECT pg_catalog.format('%s %I.%I: %s'::pg_catalog.text,
  CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S'::pg_catalog."char" THEN 'sequence'::pg_catalog.text ELSE 'table'::pg_catalog.text END,
  s.nspname, c.relname, w.privilege)
FROM pg_catalog.pg_class c
JOIN schemas s ON s.oid OPERATOR(pg_catalog.=) c.relnamespace
JOIN me ON me.owner OPERATOR(pg_catalog.=) c.relowner
JOIN wanted w ON w.kind OPERATOR(pg_catalog.=) CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S'::pg_catalog."char" THEN 'S'::pg_catalog.text ELSE 'r'::pg_catalog.text END
WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f,S}'::pg_catalog."char"[])
  AND NOT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S'::pg_catalog."char"
    THEN pg_catalog.has_sequence_privilege($1::pg_catalog.name, c.oid, w.privilege)
    ELSE pg_catalog.has_table_privilege($1::pg_catalog.name, c.oid, w.privilege) END
UNION ALL
SELECT pg_catalog.format('routine %I.%I: %s'::pg_catalog.text, s.nspname, f.proname, w.privilege)
FROM pg_catalog.pg_proc f
JOIN schemas s ON s.oid OPERATOR(pg_catalog.=) f.pronamespace
JOIN me ON me.owner OPERATOR(pg_catalog.=) f.proowner
JOIN wanted w ON w.kind OPERATOR(pg_catalog.=) 'f'::pg_catalog.text
WHERE NOT pg_catalog.has_function_privilege($1::pg_catalog.name, f.oid, w.privilege)
UNION ALL
SELECT pg_catalog.format('schema %I: CREATE must not be held'::pg_catalog.text, n.nspname)
FROM pg_catalog.pg_namespace n
WHERE n.nspname OPERATOR(pg_catalog.!~) '^pg_'::pg_catalog.text
  AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'::pg_catalog.name
  AND pg_catalog.has_schema_privilege($1::pg_catalog.name, n.oid, 'CREATE'::pg_catalog.text)
UNION ALL
SELECT pg_catalog.format('default privileges on %s: %s'::pg_catalog.text,
  CASE WHEN w.kind OPERATOR(pg_catalog.=) 'r'::pg_catalog.text THEN 'tables'::pg_catalog.text
    WHEN w.kind OPERATOR(pg_catalog.=) 'S'::pg_catalog.text THEN 'sequences'::pg_catalog.text
    WHEN w.kind OPERATOR(pg_catalog.=) 'f'::pg_catalog.text THEN 'functions'::pg_catalog.text
    ELSE 'schemas'::pg_catalog.text END, w.privilege)
FROM wanted w, me
WHERE NOT EXISTS (
  SELECT FROM pg_catalog.pg_default_acl d CROSS JOIN pg_catalog.aclexplode(d.defaclacl) x
  WHERE d.defaclrole OPERATOR(pg_catalog.=) me.owner
    AND d.defaclnamespace OPERATOR(pg_catalog.=) 0::pg_catalog.oid
    AND d.defaclobjtype::pg_catalog.text OPERATOR(pg_catalog.=) w.kind
    AND x.grantee OPERATOR(pg_catalog.=) me.grantee
    AND x.privilege_type OPERATOR(pg_catalog.=) w.privilege)
ORDER BY 1`
