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
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "managed CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "db"}, DNSNames: []string{"db.abc123.eu-west-1.rds.example"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	leaf, _ := x509.ParseCertificate(der)
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
