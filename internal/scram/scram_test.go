package scram

import (
	"strings"
	"testing"
)

func TestVerifierWithSalt(t *testing.T) {
	// Computed independently with Python's hashlib/hmac for password
	// "pencil", salt "0123456789abcdef", 4096 iterations.
	got, err := VerifierWithSalt("pencil", []byte("0123456789abcdef"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	const want = "SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$" + storedKeyB64 + ":" + serverKeyB64
	if got != want {
		t.Errorf("VerifierWithSalt() = %q, want %q", got, want)
	}
	if !IsVerifier(got) {
		t.Errorf("IsVerifier(%q) = false", got)
	}
}

func TestVerifierRandomSalt(t *testing.T) {
	a, err := Verifier("secret-one")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Verifier("secret-one")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Error("two verifiers of one password share a salt")
	}
	if strings.Contains(a, "secret-one") {
		t.Error("verifier contains the password")
	}
	if !IsVerifier(a) || !IsVerifier(b) {
		t.Errorf("not verifiers: %q %q", a, b)
	}
}

func TestIsVerifierRejectsOtherStrings(t *testing.T) {
	for _, s := range []string{"", "password", "md5abc", "SCRAM-SHA-256$4096:abc$def:gh'i", "SCRAM-SHA-256$4096:abc$def:ghi' OR '1", "x SCRAM-SHA-256$1:a$b:c"} {
		if IsVerifier(s) {
			t.Errorf("IsVerifier(%q) = true", s)
		}
	}
	if _, err := VerifierWithSalt("", []byte("s"), 1); err == nil {
		t.Error("empty password accepted")
	}
}

const (
	storedKeyB64 = "nQpbZ77WudtqufPwikHXGRt6g2QJ4zns8bZLw273DRM="
	serverKeyB64 = "jn2amWP1q1h+jgjy0YTO14S6/F02SV7taipOeB7ef20="
)
