package database

import (
	"strings"
	"testing"
)

// Every tenant password is 32 characters of [A-Za-z0-9] (about 190 bits;
// ASCII only, so SASLprep leaves it unchanged), every one of the 62
// characters occurs, and no two passwords repeat.
func TestNewPasswordStrength(t *testing.T) {
	const (
		alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		n        = 1000
	)
	seen := map[string]bool{}
	count := map[rune]int{}
	for range n {
		pw, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		if len(pw) != 32 {
			t.Fatalf("a password has %d characters, want 32", len(pw))
		}
		for _, c := range pw {
			if !strings.ContainsRune(alphabet, c) {
				t.Fatalf("a password has a character outside [A-Za-z0-9] (%U)", c)
			}
			count[c]++
		}
		if seen[pw] {
			t.Fatal("two passwords repeat")
		}
		seen[pw] = true
	}
	// 32000 draws over 62 characters: about 516 of each. A character that
	// never occurs, or occurs at twice its share, means a smaller or skewed
	// alphabet.
	for _, c := range alphabet {
		if count[c] == 0 || count[c] > 2*32*n/len(alphabet) {
			t.Errorf("character %q occurs %d times in %d passwords, want about %d", c, count[c], n, 32*n/len(alphabet))
		}
	}
}
