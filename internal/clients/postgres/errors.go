package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Class is the kind of a failure, as far as a human needs to know it.
type Class string

// Failure classes.
const (
	// ClassUnavailable: the server could not be reached or is not accepting
	// work now (refused, timed out, starting up, too many connections).
	// Retrying later may succeed without anyone acting.
	ClassUnavailable Class = "DependencyUnavailable"
	// ClassAuthentication: the credential was refused, or the server's
	// certificate did not verify.
	ClassAuthentication Class = "AuthenticationFailed"
	// ClassPrivileges: logged in, but the role may not do what is needed.
	ClassPrivileges Class = "InsufficientPrivileges"
	// ClassInvalid: the request names something that does not exist or
	// cannot work (e.g. an admin database that is not there).
	ClassInvalid Class = "InvalidSpec"
	// ClassUnsupported: the server's major version is not supported.
	ClassUnsupported Class = "UnsupportedVersion"
	// ClassDependentObjects: a role cannot be dropped because it still owns
	// objects or holds privileges somewhere (SQLSTATE 2BP01). A human must
	// reassign or drop them; retrying alone never succeeds.
	ClassDependentObjects Class = "DependentObjectsExist"
	// ClassConflict: the object was created by someone else meanwhile
	// (duplicate object or database): the next observation decides whether
	// it is ours.
	ClassConflict Class = "Conflict"
	// ClassReadOnly: the server accepts no writes (a standby, or a server in
	// recovery or set read-only).
	ClassReadOnly Class = "ServerReadOnly"
	// ClassRefused: the server refused the statement for a reason that
	// retrying does not change (syntax, a reserved name, a feature the
	// server lacks, a wrong value...). The message says what it said.
	ClassRefused Class = "ServerRefused"
)

// Error is a classified failure whose message is safe to show anywhere: it
// never contains the credential, and the role name only when the caller did
// not ask to redact it.
type Error struct {
	Class    Class
	SQLState string
	// Routine is the server's source function that raised the error (the
	// ErrorResponse's R field, never translated): it tells apart errors of
	// one SQLSTATE raised before and after authentication.
	Routine string
	msg     string
}

// Server functions that refuse a session after it has authenticated: the
// role's connection limit (and its LOGIN attribute) are checked in
// InitializeSessionUserId, the database's connection limit in
// CheckMyDatabase, both called after PerformAuthentication. The server's
// own "too many clients" (also 53300) is raised before authentication, in
// another function.
const (
	routineSessionUser = "InitializeSessionUserId"
	routineDatabase    = "CheckMyDatabase"
)

// LimitAfterAuthentication reports whether err is a login refused for a
// full connection limit of the role or of the database (SQLSTATE 53300)
// after the password was accepted.
func LimitAfterAuthentication(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.SQLState == "53300" && (e.Routine == routineSessionUser || e.Routine == routineDatabase)
}

func (e *Error) Error() string { return e.msg }

// ClassOf returns the class of err, or "" when it is not an *Error.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ""
}

// Classify turns an error from pgx into an *Error. Every string in redact
// (the admin username and password) is removed from the message, which is
// built from the cause rather than from pgx's text (pgx names the user).
func Classify(err error, redact ...string) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	c, state, msg := classify(err)
	for _, r := range redact {
		if r != "" {
			msg = strings.ReplaceAll(msg, r, "[redacted]")
		}
	}
	e = &Error{Class: c, SQLState: state, msg: msg}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		e.Routine = pe.Routine
	}
	return e
}

func classify(err error) (Class, string, string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return classifyPg(pe)
	}
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	switch {
	case errors.Is(err, ErrTLSVerification):
		return ClassAuthentication, "", innermost(err, ErrTLSVerification)
	case errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie):
		return ClassAuthentication, "", "TLS verification failed: " + innermost(err, nil)
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return ClassUnavailable, "", "timed out talking to the server"
	case errors.Is(err, context.Canceled):
		return ClassUnavailable, "", "canceled"
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe):
		return ClassUnavailable, "", fmt.Sprintf("cannot reach the server: %s %s: %v", oe.Op, addr(oe), oe.Err)
	case errors.As(err, &ne):
		return ClassUnavailable, "", "cannot reach the server: network error"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return ClassUnavailable, "", "the server closed the connection"
	case strings.Contains(err.Error(), "require_auth"):
		return ClassAuthentication, "", "the server did not authenticate the login with SCRAM-SHA-256 (it asked for the password in clear text or as MD5, or for none): the provider sends passwords only in answer to SCRAM-SHA-256; the server needs a scram-sha-256 line in pg_hba.conf for this role"
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return ClassUnavailable, "", "the server refused TLS: it does not offer SSL, and the sslMode requires it (never downgraded)"
	}
	return ClassUnavailable, "", "cannot talk to the server: " + innermost(err, nil)
}

func classifyPg(pe *pgconn.PgError) (Class, string, string) {
	code := pe.Code
	said := fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, code)
	switch code {
	case "28P01":
		return ClassAuthentication, code, "password authentication failed for the admin credential (SQLSTATE 28P01)"
	case "28000":
		// pg_hba.conf rejected the login, or the role may not log in.
		return ClassAuthentication, code, fmt.Sprintf("the server refused the login: %s (SQLSTATE 28000)", pe.Message)
	case "3D000":
		return ClassInvalid, code, said
	case "42501":
		return ClassPrivileges, code, said
	case "2BP01":
		return ClassDependentObjects, code, fmt.Sprintf("%s%s: the role still owns objects or holds privileges in some database; as the admin or a superuser, run REASSIGN OWNED BY <role> TO <another role> and DROP OWNED BY <role> in each database listed, then the provider retries", said, detail(pe))
	case "42939":
		return ClassInvalid, code, said + ": the name is reserved by PostgreSQL (names starting with pg_, public, none); choose another name"
	case "42710", "42P04", "23505":
		return ClassConflict, code, said + ": someone else created it meanwhile; the next observation decides whether it is this Database's"
	case "25006":
		return ClassReadOnly, code, said + ": the server is read-only (a standby, in recovery, or default_transaction_read_only): point the config at the primary"
	case "58P01":
		// A missing file, e.g. an extension's control or library file.
		return ClassRefused, code, said + ": the server lacks a file it needs (an extension's files not installed on the server?)"
	}
	switch code[:2] {
	case "08", "53", "57", "58", "40", "55":
		// Connection problems, out of resources, operator intervention or
		// shutdown, system errors, transaction rollbacks (serialization,
		// deadlock) and objects in use or locked: retrying later may work.
		return ClassUnavailable, code, fmt.Sprintf("the server is not accepting work: %s", said)
	case "28":
		return ClassAuthentication, code, said
	case "XX":
		return ClassUnavailable, code, fmt.Sprintf("the server reported an internal error: %s", said)
	case "0A":
		return ClassRefused, code, said + ": this server does not support it"
	}
	// Everything else (syntax and access rule violations, data exceptions,
	// invalid states...) does not change by retrying.
	return ClassRefused, code, said
}

// detail returns the server's DETAIL line (e.g. which objects depend on a
// role), prefixed for appending, or "".
func detail(pe *pgconn.PgError) string {
	if pe.Detail == "" {
		return ""
	}
	return " (" + strings.ReplaceAll(pe.Detail, "\n", "; ") + ")"
}

// innermost returns the message of the deepest wrapped error, skipping the
// pgx wrappers that name the user; with stop set, the text of the chain from
// stop down.
func innermost(err error, stop error) string {
	for {
		if stop != nil && err != nil && strings.HasPrefix(err.Error(), stop.Error()) {
			return err.Error()
		}
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

func addr(oe *net.OpError) string {
	if oe.Addr != nil {
		return oe.Addr.String()
	}
	return ""
}
