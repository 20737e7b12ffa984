package postgres_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
)

// TestVerifyFullWithADNSOnlyCertificate: managed services issue server
// certificates that carry DNS names only. verify-full without a hostaddr
// verifies the name; with a hostaddr it also requires the address, which
// such a certificate cannot satisfy.
func TestVerifyFullWithADNSOnlyCertificate(t *testing.T) {
	ca, caKey, _ := newCert(t, "managed CA", nil, true, nil, nil)
	leaf, _, _ := newCert(t, "db", []string{"db.abc123.eu-west-1.rds.example"}, false, ca, caKey)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}

	for name, tc := range map[string]struct {
		host, hostaddr string
		want           string // "" = verifies
	}{
		"NameOnly":      {host: "db.abc123.eu-west-1.rds.example"},
		"WrongName":     {host: "db.other.example", want: `does not name host "db.other.example"`},
		"WithHostaddr":  {host: "db.abc123.eu-west-1.rds.example", hostaddr: "192.0.2.10", want: "does not name hostaddr 192.0.2.10"},
		"AddressAsHost": {host: "192.0.2.10", want: "does not name host"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := postgres.TLSConfig(postgres.SSLVerifyFull, tc.host, tc.hostaddr, roots)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.VerifyConnection(cs)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("verify = %v, want %q", err, tc.want)
			}
		})
	}
}

// newCert makes a certificate for a test: signed by parent with parentKey,
// or self-signed when parent is nil. It returns the certificate, its key and
// its DER.
func newCert(t *testing.T, cn string, dns []string, isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key, der
}
