package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Floor steps, in the order a Create runs them.
var floorSteps = []string{"kv write+read", "create role", "create database", "connect grants", "extension login", "verify login"}

// plainSteps are the floor's steps a plain loop has (it keeps no
// credential in OpenBao).
var plainSteps = floorSteps[1:]

type floorResult struct {
	N int
	// Total is the straight-line time for N tenants, one after another
	// (the floor's own tenants: the plain loop's are not counted).
	Total time.Duration
	// Steps is the time spent in each step over all N tenants.
	Steps map[string]time.Duration
	// Plain is the same for the plain loop's N tenants, and PlainTotal
	// their total.
	Plain      map[string]time.Duration
	PlainTotal time.Duration
	// CreateDBOnly is N sequential CREATE DATABASE statements through the
	// provider's pool, nothing else; CreateDBOnlyPlain N through the plain
	// loop's session, alternating with them.
	CreateDBOnly, CreateDBOnlyPlain time.Duration
	// CPU used by each component while the tenants were made.
	CPU cpuShare
	// Server is the server's settings; Activity what the server and the
	// machine did while the tenants were made.
	Server   serverInfo
	Activity string
}

// runFloor does, per tenant and sequentially, exactly the external work of
// a Create with the provider's own clients (the admin pool and SQL of
// internal/clients/postgres, the KV client of internal/clients/openbao with
// the provider's Kubernetes-auth login and policy), minus the controller:
//
//	KV write (check-and-set 0) + read back; CREATE ROLE with a SCRAM
//	verifier + GRANT role TO CURRENT_USER (PostgreSQL 15 needs the
//	membership for CREATE DATABASE ... OWNER); CREATE DATABASE ... OWNER;
//	REVOKE CONNECT FROM PUBLIC / GRANT CONNECT (one transaction); a login as
//	the tenant that lists and creates pg_trgm; one more login as the
//	tenant (the verification a Ready Observe makes).
//
// Each floor tenant alternates with a plain loop's tenant (plainTenant: the
// same statements over one plain pgx session, no OpenBao), the floor's
// first on even i and the plain loop's first on odd i, so both meet the
// same server state (its databases, its WAL, the machine's page cache and
// the other users of the machine) and their per-step costs compare within
// one run.
//
// Afterwards it times N CREATE DATABASE statements alone through the pool,
// alternating with N through the plain session the same way.
func runFloor(ctx context.Context, b *benchEnv, n int) (*floorResult, error) {
	pool, kv, closeFloor, err := floorClients(ctx, b)
	if err != nil {
		return nil, err
	}
	defer closeFloor()
	plain, err := newPlainLoop(ctx, b)
	if err != nil {
		return nil, err
	}
	defer plain.close()
	r := &floorResult{N: n, Steps: map[string]time.Duration{}, Plain: map[string]time.Duration{}, Server: b.server}

	act0, err := readActivity(ctx, b.super)
	if err != nil {
		return nil, err
	}
	cpu0 := sampleCPU()
	for i := 0; i < n; i++ {
		floor := func() error {
			t := time.Now()
			err := floorTenant(ctx, pool, kv, b, fmt.Sprintf("f%04d", i), r.Steps)
			r.Total += time.Since(t)
			return err
		}
		loop := func() error {
			t := time.Now()
			err := plain.tenant(ctx, fmt.Sprintf("p%04d", i), r.Plain)
			r.PlainTotal += time.Since(t)
			return err
		}
		if err := alternate(i, floor, loop); err != nil {
			return nil, err
		}
	}
	r.CPU = sampleCPU().sub(cpu0)
	act1, err := readActivity(ctx, b.super)
	if err != nil {
		return nil, err
	}
	r.Activity = activityNote(act0, act1, 2*n)

	// CREATE DATABASE alone.
	for i := 0; i < n; i++ {
		viaPool := func() error {
			t := time.Now()
			err := pool.CreateDatabase(ctx, fmt.Sprintf("c%04d", i), b.Postgres.AdminUser)
			r.CreateDBOnly += time.Since(t)
			return err
		}
		viaPlain := func() error {
			t := time.Now()
			err := plain.createDatabase(ctx, fmt.Sprintf("d%04d", i), b.Postgres.AdminUser)
			r.CreateDBOnlyPlain += time.Since(t)
			return err
		}
		if err := alternate(i, viaPool, viaPlain); err != nil {
			return nil, fmt.Errorf("create database alone: %w", err)
		}
	}
	return r, nil
}

// alternate runs a then b on even i, b then a on odd i.
func alternate(i int, a, b func() error) error {
	if i%2 == 1 {
		a, b = b, a
	}
	if err := a(); err != nil {
		return err
	}
	return b()
}

func floorTenant(ctx context.Context, pool *postgres.Pool, kv *openbao.Client, b *benchEnv, name string, steps map[string]time.Duration) error {
	lap := stepClock(steps)
	password, err := database.NewPassword()
	if err != nil {
		return err
	}
	if err := floorRecord(ctx, kv, b, tenancy.CredentialPath(options.DefaultDatabaseBasePath, name), name, name, password); err != nil {
		return err
	}
	lap("kv write+read")
	verifier, err := scram.Verifier(password)
	if err != nil {
		return err
	}
	if err := pool.CreateRole(ctx, name, verifier); err != nil {
		return err
	}
	lap("create role")
	if err := pool.CreateDatabase(ctx, name, name); err != nil {
		return err
	}
	lap("create database")
	if err := pool.RestrictConnect(ctx, name, name); err != nil {
		return err
	}
	lap("connect grants")
	cred := postgres.Credential{Username: name, Password: password}
	c, err := pool.ConnectAs(ctx, name, cred)
	if err != nil {
		return err
	}
	if _, err := c.Extensions(ctx); err != nil {
		return err
	}
	if err := c.CreateExtension(ctx, "pg_trgm"); err != nil {
		return err
	}
	if err := c.Close(ctx); err != nil {
		return err
	}
	lap("extension login")
	c, err = pool.ConnectAs(ctx, name, cred)
	if err != nil {
		return err
	}
	exts, err := c.Extensions(ctx)
	if err != nil {
		return err
	}
	_ = c.Close(ctx)
	if len(exts) < 2 { // plpgsql and pg_trgm
		return fmt.Errorf("%s: extensions %v", name, exts)
	}
	lap("verify login")
	return nil
}

// stepClock times consecutive steps: each call adds the time since the
// last one (or since stepClock) to steps[step].
func stepClock(steps map[string]time.Duration) func(step string) {
	t := time.Now()
	return func(step string) {
		now := time.Now()
		steps[step] += now.Sub(t)
		t = now
	}
}

// floorRecord writes a credential record for username on database as the
// provider does, and reads it back.
func floorRecord(ctx context.Context, kv *openbao.Client, b *benchEnv, path, username, database, password string) error {
	pg := b.Postgres
	data := map[string]string{
		"username": username, "password": password, "database": database,
		"host": pg.Host, "hostaddr": pg.Hostaddr, "port": strconv.Itoa(pg.Port), "sslmode": string(postgres.SSLVerifyFull),
	}
	if _, err := kv.Write(ctx, path, data, 0); err != nil {
		return err
	}
	rec, err := kv.Read(ctx, path)
	if err != nil {
		return err
	}
	if rec == nil || rec.Data["password"] != password {
		return fmt.Errorf("%s: the record read back differs", path)
	}
	return nil
}

// floorClients are the floor's clients, built as the provider builds them
// (the admin pool and the KV client with the provider's Kubernetes-auth
// login) and warmed up as a running provider has them: one admin
// connection, the OpenBao token, and three CREATE/DROP DATABASE pairs for
// the server's caches (a provider run's first creates are cold too, but
// the floor should not be inflated by them).
func floorClients(ctx context.Context, b *benchEnv) (*postgres.Pool, *openbao.Client, func(), error) {
	pools := postgres.NewManager(postgres.Options{CABundleFile: b.CA.CertFile})
	fail := func(err error) (*postgres.Pool, *openbao.Client, func(), error) {
		pools.Close()
		return nil, nil, nil, err
	}
	pg := b.Postgres
	pool, _, err := pools.Get("bench/floor", types.UID("floor"), postgres.Target{
		Host: pg.Host, Hostaddr: pg.Hostaddr, Port: pg.Port, Database: "postgres", SSLMode: postgres.SSLVerifyFull,
	}, postgres.Credential{Username: pg.AdminUser, Password: pg.AdminPassword})
	if err != nil {
		return fail(err)
	}
	kv, err := openbao.New(openbao.Options{
		Address: b.OpenBao.Address, CABundleFile: b.CA.CertFile,
		AuthMount: b.OpenBao.AuthMount, AuthRole: b.OpenBao.ProviderRole,
		ServiceAccountTokenFile: b.tokenFile, KVMount: b.OpenBao.KVMount,
	})
	if err != nil {
		return fail(err)
	}
	if _, err := pool.Observe(ctx, "warmup", "warmup"); err != nil {
		return fail(err)
	}
	if _, err := kv.Read(ctx, tenancy.CredentialPath(options.DefaultDatabaseBasePath, "warmup")); err != nil {
		return fail(err)
	}
	for i := 0; i < 3; i++ {
		if err := pool.CreateDatabase(ctx, "warmup", pg.AdminUser); err != nil {
			return fail(err)
		}
		if err := pool.DropDatabase(ctx, "warmup", pg.AdminUser); err != nil {
			return fail(err)
		}
	}
	return pool, kv, pools.Close, nil
}
