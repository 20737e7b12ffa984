package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// converge waits, up to the settle time, until the components serve and
// every Tenant is where the workload left it: each live one Ready with the
// rotations asked done, each deleted one gone with its Database. It then
// writes a row with each newly Ready Tenant's Secret. It returns how long
// that took; not converging is a violation (and the run goes on).
func (s *soak) converge(ctx context.Context, label string) (time.Duration, error) {
	t0 := time.Now()
	deadline := t0.Add(s.c.Settle)
	var why string
	for {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		why = s.notConverged(ctx)
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			s.report.violation("after %s: not converged within %s: %s", label, s.c.Settle, why)
			return time.Since(t0), nil
		}
		time.Sleep(time.Second)
	}
	took := time.Since(t0)
	for _, t := range s.sorted() {
		if t.Row {
			continue
		}
		if err := s.withSecret(ctx, t, func(c *pgx.Conn) error {
			_, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS soak (v text); INSERT INTO soak VALUES ('written when first Ready')`)
			return err
		}); err != nil {
			s.report.violation("after %s: Tenant %s is Ready but its Secret does not write: %v", label, t.key(), err)
			continue
		}
		t.Row = true
	}
	return took, nil
}

func (s *soak) sorted() []*tenant {
	ts := make([]*tenant, 0, len(s.live))
	for _, t := range s.live {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].key() < ts[j].key() })
	return ts
}

// notConverged says what is not there yet ("": everything is).
func (s *soak) notConverged(ctx context.Context) string {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.f.Healthy(hctx); err != nil {
		return "a component does not serve: " + err.Error()
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tl := &unstructured.UnstructuredList{}
	tl.SetAPIVersion(tenantkit.TenantAPI)
	tl.SetKind("TenantList")
	if err := s.kube.List(rctx, tl); err != nil {
		return "cannot list Tenants: " + err.Error()
	}
	seen := map[string]*unstructured.Unstructured{}
	for i := range tl.Items {
		u := &tl.Items[i]
		seen[u.GetNamespace()+"/"+u.GetName()] = u
	}
	var waiting []string
	for _, t := range s.sorted() {
		u, ok := seen[t.key()]
		if !ok {
			return fmt.Sprintf("the live Tenant %s is gone", t.key())
		}
		if tenantkit.Phase(u) != "Ready" || tenantkit.Ready(u) != "True" {
			r, _, _ := unstructured.NestedString(u.Object, "status", "reason")
			waiting = append(waiting, fmt.Sprintf("%s (%s %s)", t.key(), tenantkit.Phase(u), r))
			continue
		}
		if t.Database == "" {
			t.Database, _, _ = unstructured.NestedString(u.Object, "status", "databaseName")
		}
		if t.Rotations > 0 {
			db, err := s.getDatabase(rctx, t.Database)
			if err != nil {
				return fmt.Sprintf("cannot read Database %s: %v", t.Database, err)
			}
			id, _, _ := unstructured.NestedString(db.Object, "status", "atProvider", "credentialRotation", "id")
			if want := fmt.Sprintf("soak-%d", t.Rotations); id != want {
				waiting = append(waiting, fmt.Sprintf("%s (rotation %s not done: %q)", t.key(), want, id))
				continue
			}
		}
		// The app's Secret follows the rotation: it logs in.
		if t.Synced < t.Rotations {
			if err := s.withSecret(rctx, t, func(*pgx.Conn) error { return nil }); err != nil {
				waiting = append(waiting, fmt.Sprintf("%s (its Secret does not log in after rotation %d: %v)", t.key(), t.Rotations, err))
				continue
			}
			t.Synced = t.Rotations
		}
	}
	for _, r := range s.rebinds {
		w, err := s.rebindWaiting(rctx, r, seen)
		if err != nil {
			return err.Error()
		}
		if w != "" {
			waiting = append(waiting, w)
		}
	}
	for _, t := range s.gone {
		if _, ok := seen[t.key()]; ok {
			waiting = append(waiting, t.key()+" (deleting)")
			continue
		}
		if t.Database != "" {
			_, err := s.getDatabase(rctx, t.Database)
			if err == nil {
				waiting = append(waiting, t.key()+" (its Database "+t.Database+" is still there)")
			} else if !apierrors.IsNotFound(err) {
				return fmt.Sprintf("cannot read Database %s: %v", t.Database, err)
			}
		}
	}
	if len(waiting) > 0 {
		if len(waiting) > 5 {
			return fmt.Sprintf("%d Tenants, first %s", len(waiting), strings.Join(waiting[:5], ", "))
		}
		return strings.Join(waiting, ", ")
	}
	return ""
}

// withSecret logs in with the Tenant's Secret, as its app would (its
// host name, verify-full), and runs f in that session.
func (s *soak) withSecret(ctx context.Context, t *tenant, f func(*pgx.Conn) error) error {
	return s.login(ctx, t.NS, t.secret(), f)
}

func (s *soak) login(ctx context.Context, ns, secret string, f func(*pgx.Conn) error) error {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sec := &corev1.Secret{}
	if err := s.kube.Get(lctx, client.ObjectKey{Namespace: ns, Name: secret}, sec); err != nil {
		return err
	}
	d := func(k string) string { return string(sec.Data[k]) }
	// By its host name, as an app's libpq or driver would (pgx has no
	// hostaddr; the name resolves to the same address on the node).
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=%s sslrootcert=%s",
		d("host"), d("port"), d("database"), d("username"), d("sslmode"), s.e.CA.CertFile))
	if err != nil {
		return fmt.Errorf("the Secret's connection settings: %w", err)
	}
	cfg.Password = d("password")
	c, err := pgx.ConnectConfig(lctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx)) //nolint:errcheck // a check's session
	return f(c)
}
