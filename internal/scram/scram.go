// Package scram computes PostgreSQL SCRAM-SHA-256 password verifiers, so that
// a password never travels to the server in clear: CREATE/ALTER ROLE receive
// the verifier, which the server stores as is.
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
)

// Iterations is PostgreSQL's default scram_iterations.
const Iterations = 4096

const saltLen = 16

// Verifier returns the SCRAM-SHA-256 verifier of password with a fresh random
// salt, in PostgreSQL's storage format:
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>.
func Verifier(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("cannot read random salt: %w", err)
	}
	return VerifierWithSalt(password, salt, Iterations)
}

// VerifierWithSalt is Verifier with a given salt and iteration count.
func VerifierWithSalt(password string, salt []byte, iterations int) (string, error) {
	if password == "" {
		return "", fmt.Errorf("empty password")
	}
	if iterations < 1 {
		return "", fmt.Errorf("iterations must be positive")
	}
	// RFC 5802/7677. PostgreSQL applies SASLprep to the password; the
	// provider only generates ASCII passwords, for which SASLprep is the
	// identity, so none is needed here.
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(storedKey[:]), b64(serverKey)), nil
}

var verifierFormat = regexp.MustCompile(`^SCRAM-SHA-256\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$`)

// IsVerifier reports whether s is in the SCRAM-SHA-256 verifier format. Only
// strings that pass are ever placed in SQL, so a password can never be sent
// by mistake, and the literal needs no escaping.
func IsVerifier(s string) bool { return verifierFormat.MatchString(s) }

func mac(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}
