package database_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	dbv1alpha1 "ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	pctrl "ddupan.top/provider-postgresql-tenant/internal/controller"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// changeLogs is a change log service on a Unix socket, as Crossplane's
// sidecar serves it, keeping every entry it receives.
type changeLogs struct {
	v1alpha1.UnimplementedChangeLogServiceServer
	mu      sync.Mutex
	entries []*v1alpha1.ChangeLogEntry
}

func (c *changeLogs) SendChangeLog(_ context.Context, r *v1alpha1.SendChangeLogRequest) (*v1alpha1.SendChangeLogResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, r.GetEntry())
	return &v1alpha1.SendChangeLogResponse{}, nil
}

// of returns the entries for the Database named name, as JSON lines.
func (c *changeLogs) of(kind, name string) ([]*v1alpha1.ChangeLogEntry, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*v1alpha1.ChangeLogEntry
	var lines []string
	for _, e := range c.entries {
		if e.GetKind() == kind && e.GetName() == name {
			out = append(out, e)
			b, _ := protojson.Marshal(e)
			lines = append(lines, string(b))
		}
	}
	return out, strings.Join(lines, "\n")
}

// startChangeLogs serves the change log service on a socket and returns the
// options the provider builds from --enable-changelogs for that socket.
func startChangeLogs() (*changeLogs, *controller.ChangeLogOptions, func(), error) {
	dir, err := os.MkdirTemp("", "ppt-changelogs-")
	if err != nil {
		return nil, nil, nil, err
	}
	socket := filepath.Join(dir, "changelogs.sock")
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "unix", socket)
	if err != nil {
		return nil, nil, nil, err
	}
	srv := grpc.NewServer()
	c := &changeLogs{}
	v1alpha1.RegisterChangeLogServiceServer(srv, c)
	go srv.Serve(l) //nolint:errcheck // stopped below
	opts, closeClient, err := pctrl.ChangeLogs(socket, "provider-postgresql-tenant:test")
	if err != nil {
		srv.Stop()
		return nil, nil, nil, err
	}
	return c, opts, func() { _ = closeClient(); srv.Stop(); _ = os.RemoveAll(dir) }, nil
}

// TestChangeLogsRecordEveryWriteWithoutSecrets: with change logs on, the
// create, a drift repair and the delete of a Database each reach the change
// log service, and no entry holds the role's password or the admin's
// username or password.
func TestChangeLogsRecordEveryWriteWithoutSecrets(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	const name = "chlog"
	d := newDB(name, func(d *dbv1alpha1.Database) { d.Spec.ReclaimPolicy = dbv1alpha1.ReclaimDelete })
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	password, _ := readKV(t, dbPath(name)).Data["password"].(string)
	if password == "" {
		t.Fatal("no password in the record")
	}

	// Drift the owner may cause: repaired by an Update.
	if _, err := superConn(t, "postgres").Exec(ctx, "ALTER DATABASE "+name+" IS_TEMPLATE true"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "the template mark repaired", func(d *dbv1alpha1.Database) bool {
		var tpl bool
		_ = superConn(t, "postgres").QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&tpl)
		return ready(d) && !tpl
	})
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)

	want := []v1alpha1.OperationType{v1alpha1.OperationType_OPERATION_TYPE_CREATE, v1alpha1.OperationType_OPERATION_TYPE_UPDATE, v1alpha1.OperationType_OPERATION_TYPE_DELETE}
	var entries []*v1alpha1.ChangeLogEntry
	var lines string
	err := testenv.WaitFor(ctx, 30*time.Second, func(context.Context) error {
		entries, lines = changes.of("Database", name)
		seen := map[v1alpha1.OperationType]bool{}
		for _, e := range entries {
			if e.GetErrorMessage() == "" {
				seen[e.GetOperation()] = true
			}
		}
		for _, op := range want {
			if !seen[op] {
				return fmt.Errorf("%w: no successful %s", testenv.ErrNotYet, op)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("change log entries for %s: %v\n%s", name, err, lines)
	}
	for _, e := range entries {
		if e.GetApiVersion() != dbv1alpha1.SchemeGroupVersion.String() || e.GetProvider() != "provider-postgresql-tenant:test" || e.GetSnapshot() == nil {
			t.Errorf("entry %s: apiVersion %q provider %q snapshot %v", e.GetOperation(), e.GetApiVersion(), e.GetProvider(), e.GetSnapshot() != nil)
		}
	}
	for what, s := range map[string]string{"the role's password": password, "the admin's password": env.Postgres.AdminPassword, "the admin's username": env.Postgres.AdminUser} {
		if strings.Contains(lines, s) {
			t.Errorf("a change log entry holds %s", what)
		}
	}
}

// changes receives the in-process controllers' change log entries.
var changes *changeLogs
