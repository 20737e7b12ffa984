package testenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAuditLineStillBeingWrittenIsLeftForTheNextRead: OpenBao appends to
// its audit log while a test reads it; a last line without its newline is
// not yet a line, and reading it must neither fail nor count it.
func TestAuditLineStillBeingWrittenIsLeftForTheNextRead(t *testing.T) {
	login := `{"type":"response","request":{"operation":"update","path":"auth/kubernetes/login"},"response":{"auth":{"metadata":{"service_account_namespace":"team-a"}}}}`
	read := `{"type":"response","auth":{"metadata":{"service_account_namespace":"team-a"}},"request":{"operation":"read","path":"secret/data/x"}}`
	request := `{"type":"request","request":{"operation":"read","path":"secret/data/x"}}`
	want := []AuditEntry{
		{Operation: "update", Path: "auth/kubernetes/login", ServiceAccountNamespace: "team-a"},
		{Operation: "read", Path: "secret/data/x", ServiceAccountNamespace: "team-a"},
	}
	for name, log := range map[string]string{
		"complete":          login + "\n" + request + "\n" + read + "\n",
		"last line partial": login + "\n" + request + "\n" + read + "\n" + read[:40],
	} {
		got, err := readAudit(strings.NewReader(log))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: -want +got:\n%s", name, diff)
		}
	}
	// A complete line that is not JSON is a broken log, not a race.
	if _, err := readAudit(strings.NewReader(login + "\nnot json\n")); err == nil {
		t.Error("a complete line that is not JSON was read without an error")
	}
}
