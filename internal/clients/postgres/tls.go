package postgres

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// SSLMode is libpq's sslmode, limited to the modes the provider supports.
type SSLMode string

// The supported modes, with libpq's meanings.
const (
	SSLDisable    SSLMode = "disable"
	SSLRequire    SSLMode = "require"
	SSLVerifyCA   SSLMode = "verify-ca"
	SSLVerifyFull SSLMode = "verify-full"
)

// ErrTLSVerification wraps every certificate verification failure, so
// callers can tell it from an unreachable server.
var ErrTLSVerification = errors.New("TLS verification failed")

// TLSConfig returns the TLS configuration for mode, or nil for disable.
//
//   - require encrypts without verifying anything (as the provider defines
//     it, even when a CA bundle is configured).
//   - verify-ca verifies the chain against roots.
//   - verify-full also verifies that the certificate names host as a DNS
//     SAN (or IP SAN when host is an IP literal) and, when one is set,
//     hostaddr as an IP SAN: the provider then dials hostaddr, so both the
//     name it was told and the address it actually reached must be in the
//     certificate. Without hostaddr the provider dials host, and the name is
//     what is verified.
//
// Verification is done in VerifyConnection so that dialing an IP while
// checking a DNS name works, with the server name sent as SNI. There is no
// fallback: a mode is never downgraded.
func TLSConfig(mode SSLMode, host, hostaddr string, roots *x509.CertPool) (*tls.Config, error) {
	switch mode {
	case SSLDisable:
		return nil, nil
	case SSLRequire:
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, ServerName: sni(host)}, nil //nolint:gosec // sslmode=require means no verification, by definition.
	case SSLVerifyCA, SSLVerifyFull:
	default:
		return nil, fmt.Errorf("unsupported sslMode %q", mode)
	}
	if roots == nil {
		return nil, fmt.Errorf("sslMode %s needs a CA bundle (--ca-bundle)", mode)
	}
	if mode == SSLVerifyFull && hostaddr != "" && net.ParseIP(hostaddr) == nil {
		return nil, fmt.Errorf("hostaddr %q is not an IP literal", hostaddr)
	}
	return &tls.Config{
		// The standard verification would check the dialed address against
		// ServerName; it is replaced by VerifyConnection below, which checks
		// exactly what the mode asks for.
		InsecureSkipVerify: true, //nolint:gosec // verification happens in VerifyConnection.
		MinVersion:         tls.VersionTLS12,
		ServerName:         sni(host),
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verify(cs.PeerCertificates, mode, host, hostaddr, roots)
		},
	}, nil
}

func verify(certs []*x509.Certificate, mode SSLMode, host, hostaddr string, roots *x509.CertPool) error {
	if len(certs) == 0 {
		return fmt.Errorf("%w: the server presented no certificate", ErrTLSVerification)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
		return fmt.Errorf("%w: %w", ErrTLSVerification, err)
	}
	if mode != SSLVerifyFull {
		return nil
	}
	if err := certs[0].VerifyHostname(host); err != nil {
		return fmt.Errorf("%w: the certificate does not name host %q: %w", ErrTLSVerification, host, err)
	}
	if hostaddr == "" {
		return nil
	}
	if err := certs[0].VerifyHostname(hostaddr); err != nil {
		return fmt.Errorf("%w: the certificate does not name hostaddr %s as an IP SAN: %w", ErrTLSVerification, hostaddr, err)
	}
	return nil
}

// sni returns the TLS server name: host, unless it is an IP literal (SNI
// carries DNS names only).
func sni(host string) string {
	if net.ParseIP(host) != nil {
		return ""
	}
	return host
}

// ParseCABundle returns a pool of the PEM certificates in b; nil input
// gives a nil pool.
func ParseCABundle(b []byte) (*x509.CertPool, error) {
	if len(b) == 0 {
		return nil, nil
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, errors.New("the CA bundle holds no PEM certificate")
	}
	return p, nil
}
