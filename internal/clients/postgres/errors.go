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
)

// Error is a classified failure whose message is safe to show anywhere: it
// never contains the credential, and the role name only when the caller did
// not ask to redact it.
type Error struct {
	Class    Class
	SQLState string
	msg      string
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
	return &Error{Class: c, SQLState: state, msg: msg}
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
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return ClassUnavailable, "", "the server refused TLS: it does not offer SSL, and the sslMode requires it (never downgraded)"
	}
	return ClassUnavailable, "", "cannot talk to the server: " + innermost(err, nil)
}

func classifyPg(pe *pgconn.PgError) (Class, string, string) {
	code := pe.Code
	switch {
	case code == "28P01":
		return ClassAuthentication, code, "password authentication failed for the admin credential (SQLSTATE 28P01)"
	case code == "28000":
		// pg_hba.conf rejected the login, or the role may not log in.
		return ClassAuthentication, code, fmt.Sprintf("the server refused the login: %s (SQLSTATE 28000)", pe.Message)
	case code == "3D000":
		return ClassInvalid, code, fmt.Sprintf("%s (SQLSTATE 3D000)", pe.Message)
	case code == "42501":
		return ClassPrivileges, code, fmt.Sprintf("%s (SQLSTATE 42501)", pe.Message)
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57"), strings.HasPrefix(code, "58"):
		return ClassUnavailable, code, fmt.Sprintf("the server is not accepting work: %s (SQLSTATE %s)", pe.Message, code)
	}
	return ClassUnavailable, code, fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, code)
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
