package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throw-away certificate authority generated for one test run.
type CA struct {
	// CertFile is the PEM file of the CA certificate.
	CertFile string
	// CertPEM is the CA certificate in PEM form.
	CertPEM []byte

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newCA generates a CA and writes its certificate to dir/<name>.crt.
func newCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{
		CertFile: filepath.Join(dir, name+".crt"),
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		cert:     cert,
		key:      key,
	}
	return ca, os.WriteFile(ca.CertFile, ca.CertPEM, 0o644) //nolint:gosec // a certificate, public; the servers under test read it, PostgreSQL as another user
}

// KeyPair is a certificate and its private key, in PEM files.
type KeyPair struct {
	CertFile, KeyFile string
}

// issue signs a server certificate for the given DNS names and IPs and writes
// it to dir/<name>.crt and dir/<name>.key (mode 0600).
func (ca *CA) issue(dir, name string, dnsNames []string, ips []net.IP) (*KeyPair, error) {
	return ca.issueFor(dir, name, dnsNames, ips, x509.ExtKeyUsageServerAuth)
}

// issueTLSDir writes dir/tls.crt, dir/tls.key and dir/ca.crt: the layout
// Crossplane core and function servers read.
func (ca *CA) issueTLSDir(dir string, dnsNames []string, ips []net.IP, usages ...x509.ExtKeyUsage) error {
	kp, err := ca.issueFor(dir, "tls", dnsNames, ips, usages...)
	if err != nil {
		return err
	}
	if err := os.Rename(kp.CertFile, filepath.Join(dir, "tls.crt")); err != nil {
		return err
	}
	if err := os.Rename(kp.KeyFile, filepath.Join(dir, "tls.key")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644) //nolint:gosec // a certificate, public; the servers under test read it, PostgreSQL as another user
}

func (ca *CA) issueFor(dir, name string, dnsNames []string, ips []net.IP, usages ...x509.ExtKeyUsage) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usages,
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	kp := &KeyPair{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if err := os.WriteFile(kp.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil { //nolint:gosec // a certificate, public; the servers under test read it, PostgreSQL as another user
		return nil, err
	}
	return kp, os.WriteFile(kp.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return n
}
