package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The node's kubelet and kube-proxy install firewall chains in the network
// namespace they run in, and its servers listen on every address: none of
// it may start outside the namespace NodeMain made. These run in the
// host's namespace with no binaries, so nothing could start even without
// the refusal.
func TestNodeRefusesTheHostNetwork(t *testing.T) {
	ctx := context.Background()
	ca, err := newCA(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	notOurs := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(notOurs, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "refusing to start the node on the host network"
	for name, netns := range map[string]string{"NoNamespace": "", "AnotherNamespace": notOurs} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(nodeNetnsEnv, netns)
			if _, err := startNode(ctx, t.TempDir(), t.TempDir(), nil, ca); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("startNode: %v, want %q", err, want)
			}
			if _, err := startKube(ctx, t.TempDir(), t.TempDir(), nil, false, ca); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("startKube for a node: %v, want %q", err, want)
			}
		})
	}
}
