package controller

import (
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultChangeLogsSocket is where Crossplane's change logs sidecar listens
// when a DeploymentRuntimeConfig mounts a shared volume at
// /var/run/changelogs in both containers.
const DefaultChangeLogsSocket = "/var/run/changelogs/changelogs.sock"

// ChangeLogs returns the change log options that send an entry for every
// create, update and delete of a Database or DatabaseBinding to the change
// log service on the Unix socket, and how to close the connection. Nothing
// is dialled here: each entry waits for the socket up to crossplane-runtime's
// send timeout, and a failed send is logged and changes nothing else.
func ChangeLogs(socket, providerVersion string) (*controller.ChangeLogOptions, func() error, error) {
	if !filepath.IsAbs(socket) {
		return nil, nil, fmt.Errorf("the change logs socket %q is not an absolute path", socket)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot set up the change logs client: %w", err)
	}
	l := managed.NewGRPCChangeLogger(v1alpha1.NewChangeLogServiceClient(conn), managed.WithProviderVersion(providerVersion))
	return &controller.ChangeLogOptions{ChangeLogger: l}, conn.Close, nil
}

// ProviderVersion names this build in change log entries:
// provider-postgresql-tenant:<module version or VCS revision>.
func ProviderVersion() string {
	const name = "provider-postgresql-tenant"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + ":unknown"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "unknown"
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v = s.Value[:min(12, len(s.Value))]
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty {
			v += "-dirty"
		}
	}
	return name + ":" + v
}
