package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// dbappImage is the image of the test app (internal/testenv/dbapp) the
// test imports into the node's containerd.
const dbappImage = "ppt.local/dbapp:v1"

// rotationGrace is the grace the rotation test gives the previous login:
// longer than a rotated credential takes to reach the app's mounted file
// (the binding's copy, the ExternalSecret's sync, the kubelet's next sync
// of the Pod), with room for a loaded machine.
const rotationGrace = 15 * time.Second

// withGraceRotations is how many rotations the app goes through with the
// grace: each of the two logins takes over twice. (Ten, measured once,
// refused none either: docs/reliability.md.)
const withGraceRotations = 4

// TestRotationHandsOverToAnAppReadingItsSecretFile: an app that reads its
// mounted Secret's files afresh before every login, and logs in every
// 100 ms, is never refused through four rotations of its data role (each
// login taking over twice, from the other each time): the
// provider gives the login not in use a new password and names it in the
// Secret, and the login the app still uses keeps its password until the
// grace ends, by which time the kubelet has refreshed the file. After each
// grace the previous credential logs in no more. With the grace set to
// zero, three rotations refuse the app's logins until its file catches up:
// that is what the grace avoids.
func TestRotationHandsOverToAnAppReadingItsSecretFile(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const ns, name = "rotation", "rotation-app"
	if err := env.Node.ImportApp(ctx, "./internal/testenv/dbapp", dbappImage); err != nil {
		t.Fatal(err)
	}
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: shared, dataRoles: [{name: app, access: readWrite}]}")
	secret := tenantkit.SecretName(name) + "-app"
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, secret)
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: tenantkit.BoundDatabase(ctx, t, env, ns, name).GetName()}}
	setGrace(t, db, rotationGrace)

	app := startDBApp(ctx, t, ns, secret)
	testenv.Await(t, env.Kube.Client, db, time.Minute, "the data role app shows its login", func(d *v1alpha1.Database) bool {
		o := dataRole(d)
		return o != nil && o.Ready && o.LoginRole != ""
	}, func(d *v1alpha1.Database) string { return describeRotation(d, app) })
	first := dataRole(db)
	app.await(t, "the app logs in as "+first.LoginRole, 2*time.Minute, func(s appStats) bool { return s.lastOK == first.LoginRole })

	r := &rotator{t: t, db: db, app: app, ns: ns, secret: secret}
	t0, before := time.Now(), app.snapshot(t)
	for i := 1; i <= withGraceRotations; i++ {
		r.rotate(ctx, fmt.Sprintf("with-grace-%d", i), rotationGrace)
	}
	withGrace := app.snapshot(t).minus(before)
	took := time.Since(t0)
	t.Logf("with a grace of %s: %d logins in %s through %d rotations, %d refused, %d failed otherwise",
		rotationGrace, withGrace.attempts, took.Round(time.Second), withGraceRotations, withGrace.refused, withGrace.failed)
	if withGrace.refused != 0 {
		t.Errorf("with a grace of %s the app's logins were refused %d times of %d through %d rotations; want none refused: %s",
			rotationGrace, withGrace.refused, withGrace.attempts, withGraceRotations, describeRotation(db, app))
	}
	if withGrace.failed != 0 {
		t.Errorf("with a grace of %s %d of the app's %d logins failed otherwise; want every login to succeed: %s",
			rotationGrace, withGrace.failed, withGrace.attempts, describeRotation(db, app))
	}
	// One login every 100 ms at most; a third of that on a loaded machine
	// is still many logins across every handover.
	if want := int(took.Seconds() * 3); withGrace.attempts < want {
		t.Errorf("the app tried %d logins in %s; want at least %d (it tries every 100 ms): the count would prove little",
			withGrace.attempts, took.Round(time.Second), want)
	}

	// No grace: the login the app still uses loses its password at once,
	// and its file names it for a few seconds more.
	setGrace(t, db, 0)
	t0, before = time.Now(), app.snapshot(t)
	for i := 1; i <= 3; i++ {
		r.rotate(ctx, fmt.Sprintf("no-grace-%d", i), 0)
	}
	noGrace := app.snapshot(t).minus(before)
	took = time.Since(t0)
	t.Logf("with no grace: %d of %d logins refused in %s through three rotations (%d failed otherwise)",
		noGrace.refused, noGrace.attempts, took.Round(time.Second), noGrace.failed)
	if noGrace.refused == 0 {
		t.Errorf("with no grace the app's %d logins through three rotations were never refused; want some refused while its file still named the previous login (else the first phase proves nothing about the grace): %s",
			noGrace.attempts, describeRotation(db, app))
	}

	// The app's output, which the suite's canary reads too, never holds a
	// password it was given.
	last := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, last); err != nil {
		t.Fatal(err)
	}
	r.passwords = append(r.passwords, string(last.Data["password"]))
	out := app.log()
	for i, pw := range r.passwords {
		if strings.Contains(out, pw) {
			t.Errorf("the app's log holds the password of the data role's credential number %d", i+1)
		}
	}
}

// setGrace sets the Database's credential policy's grace period (which
// overrides the ClusterProviderConfig's).
func setGrace(t *testing.T, db *v1alpha1.Database, grace time.Duration) {
	t.Helper()
	testenv.Edit(t, env.Kube.Client, db, func(d *v1alpha1.Database) {
		if d.Spec.ForProvider.CredentialPolicy == nil {
			d.Spec.ForProvider.CredentialPolicy = &v1alpha1.CredentialPolicy{}
		}
		d.Spec.ForProvider.CredentialPolicy.GracePeriod = &metav1.Duration{Duration: grace}
	})
}

// dataRole is the Database's status of its data role "app".
func dataRole(d *v1alpha1.Database) *v1alpha1.DataRoleObservation {
	for i := range d.Status.AtProvider.DataRoles {
		if d.Status.AtProvider.DataRoles[i].Name == "app" {
			return &d.Status.AtProvider.DataRoles[i]
		}
	}
	return nil
}

// describeRotation is, for failure messages, the data role's spec and
// status and the end of the app's output.
func describeRotation(db *v1alpha1.Database, app *dbapp) string {
	y, _ := yaml.Marshal(map[string]any{"spec.forProvider.dataRoles": db.Spec.ForProvider.DataRoles,
		"spec.forProvider.credentialPolicy": db.Spec.ForProvider.CredentialPolicy, "status.atProvider.dataRoles": db.Status.AtProvider.DataRoles})
	return fmt.Sprintf("Database %s:\n%s\nthe app's output ends:\n%s", db.Name, y, app.tail(15))
}

// rotator requests the data role's rotations one after another.
type rotator struct {
	t          *testing.T
	db         *v1alpha1.Database
	app        *dbapp
	ns, secret string
	// passwords are the credentials' passwords the Secret held, to look
	// for in the app's output; never printed.
	passwords []string
}

// rotate requests rotation id and waits until it has completed, the
// previous login's grace (grace long) is over, and the app has logged in
// as the new login, which it can only have read from its refreshed file.
// Then the previous credential must log in no more.
func (r *rotator) rotate(ctx context.Context, id string, grace time.Duration) {
	t, db := r.t, r.db
	t.Helper()
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	was := dataRole(db)
	if was == nil || was.LoginRole == "" {
		t.Fatalf("before rotation %s the Database shows no login for its data role: %s", id, describeRotation(db, r.app))
	}
	from := was.LoginRole
	// The Secret names the login in use (the app logged in with it): its
	// password is the one that must stop working after the grace.
	s := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.secret}, s); err != nil {
		t.Fatal(err)
	}
	if u := string(s.Data["username"]); u != from {
		t.Fatalf("before rotation %s the Secret names %q, the Database's status %q", id, u, from)
	}
	oldPassword, database := string(s.Data["password"]), string(s.Data["database"])
	r.passwords = append(r.passwords, oldPassword)
	before := r.app.snapshot(t)

	t0 := time.Now()
	testenv.Edit(t, env.Kube.Client, db, func(d *v1alpha1.Database) {
		for i := range d.Spec.ForProvider.DataRoles {
			if d.Spec.ForProvider.DataRoles[i].Name == "app" {
				d.Spec.ForProvider.DataRoles[i].CredentialRotation = &v1alpha1.CredentialRotation{ID: id}
			}
		}
	})
	testenv.Await(t, env.Kube.Client, db, 2*time.Minute, "rotation "+id+" completed", func(d *v1alpha1.Database) bool {
		o := dataRole(d)
		return o != nil && o.Ready && o.CredentialRotation != nil && o.CredentialRotation.ID == id
	}, func(d *v1alpha1.Database) string { return describeRotation(d, r.app) })
	completed := time.Now()
	o := dataRole(db)
	to := o.LoginRole
	if to == from || !strings.HasPrefix(to, o.Role+"_") {
		t.Fatalf("rotation %s: the data role logs in as %q, was %q; want its other member (%s_1 or %s_2)", id, to, from, o.Role, o.Role)
	}
	// While the grace lasts, status shows the previous login and when it
	// ends; the provider may already have ended it when the test looks
	// late.
	if o.PreviousLogin != "" && (o.PreviousLogin != from || o.PreviousLoginEndsAt == nil || o.CredentialRotation.CompletedAt == nil ||
		o.PreviousLoginEndsAt.Sub(o.CredentialRotation.CompletedAt.Time) != grace) {
		t.Errorf("rotation %s: status shows the previous login %q until %v, the rotation completed at %v; want %q until %s later",
			id, o.PreviousLogin, o.PreviousLoginEndsAt, o.CredentialRotation.CompletedAt, from, grace)
	}

	// The grace's end and the app's first login as the new member, in
	// whichever order they come.
	var graceOver, appMoved time.Time
	err := testenv.WaitFor(ctx, grace+2*time.Minute, func(ctx context.Context) error {
		if graceOver.IsZero() {
			if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
				return err
			}
			if o := dataRole(db); o != nil && o.PreviousLogin == "" {
				graceOver = time.Now()
			}
		}
		if appMoved.IsZero() {
			if st, ok := r.app.stats(); ok && st.lastOK == to {
				appMoved = time.Now()
			}
		}
		if graceOver.IsZero() || appMoved.IsZero() {
			return testenv.ErrNotYet
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rotation %s: waiting until the previous login's grace is over (seen: %v) and the app has logged in as %s (seen: %v): %v; %s",
			id, !graceOver.IsZero(), to, !appMoved.IsZero(), err, describeRotation(db, r.app))
	}
	if c, err := oldLogin(ctx, from, oldPassword, database); err == nil {
		_ = c.Close(ctx)
		t.Errorf("rotation %s: the previous login %q still logs in with its password after its grace", id, from)
	} else if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "28") {
		t.Errorf("rotation %s: the previous login %q failed with %v; want a refused login (SQLSTATE class 28)", id, from, err)
	}
	d := r.app.snapshot(t).minus(before)
	t.Logf("rotation %s: %s -> %s completed %.1fs after the request; the app logged in as %s %.1fs after the completion, the grace ended %.1fs after it; the app's logins meanwhile: %d, %d refused",
		id, from, to, completed.Sub(t0).Seconds(), to, appMoved.Sub(completed).Seconds(), graceOver.Sub(completed).Seconds(), d.attempts, d.refused)
}

// oldLogin logs in as user with password from the test, as the app would.
func oldLogin(ctx context.Context, user, password, database string) (*pgx.Conn, error) {
	cfg, err := env.Postgres.ConnConfig(user, password, database)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// dbapp is the test app's Pod on the node.
type dbapp struct {
	ns, pod string
}

// appStats is one count line of the app.
type appStats struct {
	seq                           int
	attempts, ok, refused, failed int
	user, lastOK                  string
}

// minus is the counts since b.
func (s appStats) minus(b appStats) appStats {
	return appStats{seq: s.seq, attempts: s.attempts - b.attempts, ok: s.ok - b.ok, refused: s.refused - b.refused,
		failed: s.failed - b.failed, user: s.user, lastOK: s.lastOK}
}

// startDBApp runs the app in a Pod of ns with the Secret mounted as files
// at /etc/db and the CA that verifies the server from a ConfigMap (made
// here, as an admin gives an app namespace its server's CA), and waits
// until it runs. The Pod goes when the test ends; its output is kept in
// the run's directory, where the suite's canary looks for credentials.
func startDBApp(ctx context.Context, t *testing.T, ns, secret string) *dbapp {
	t.Helper()
	const caMap, sa = "postgresql-ca", "dbapp"
	if err := env.Kube.EnsureServiceAccount(ctx, ns, sa); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: caMap},
		Data:       map[string]string{"ca.crt": string(env.CA.CertPEM)},
	}); err != nil {
		t.Fatal(err)
	}
	uid := int64(65532)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dbapp", Labels: map[string]string{"app": "dbapp"}},
		Spec: corev1.PodSpec{
			ServiceAccountName:            sa,
			AutomountServiceAccountToken:  ptr.To(false),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "dbapp", Image: dbappImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-secret-dir=/etc/db", "-ca=/etc/postgresql-ca/ca.crt", "-interval=100ms", "-report=1s"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "credential", MountPath: "/etc/db", ReadOnly: true},
					{Name: "ca", MountPath: "/etc/postgresql-ca", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "credential", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}},
				{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: caMap}}}},
			},
		},
	}
	if err := env.Kube.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	a := &dbapp{ns: ns, pod: pod.Name}
	t.Cleanup(func() {
		if out := a.log(); out != "" {
			if err := os.WriteFile(filepath.Join(env.Dir, "dbapp-"+ns+".log"), []byte(out), 0o600); err != nil {
				t.Errorf("keeping the app's output: %v", err)
			}
		}
		if err := env.Kube.Client.Delete(context.Background(), pod); err != nil {
			t.Errorf("deleting the app's Pod: %v", err)
		}
	})
	a.await(t, "the app's Pod runs and reports", 3*time.Minute, func(appStats) bool { return true })
	return a
}

// logFiles are the app container's log files the kubelet writes.
func (a *dbapp) logFiles() []string {
	f, _ := filepath.Glob(filepath.Join(env.Node.PodLogs, a.ns+"_"+a.pod+"_*", "dbapp", "*.log"))
	return f
}

// log is the app's output: the messages of its container's log lines
// ("<time> <stream> <tag> <message>").
func (a *dbapp) log() string {
	var b strings.Builder
	for _, f := range a.logFiles() {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if p := strings.SplitN(l, " ", 4); len(p) == 4 {
				b.WriteString(p[3] + "\n")
			}
		}
	}
	return b.String()
}

// tail is the app's last n lines of output.
func (a *dbapp) tail(n int) string {
	l := strings.Split(strings.TrimRight(a.log(), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// stats is the app's last count line.
func (a *dbapp) stats() (appStats, bool) {
	l := strings.Split(a.log(), "\n")
	for i := len(l) - 1; i >= 0; i-- {
		if s, ok := parseStats(l[i]); ok {
			return s, true
		}
	}
	return appStats{}, false
}

// parseStats reads a count line:
// "dbapp: seq=N elapsed=Xs attempts=N ok=N refused=N failed=N user=U lastok=U".
func parseStats(line string) (appStats, bool) {
	if !strings.HasPrefix(line, "dbapp: seq=") {
		return appStats{}, false
	}
	var s appStats
	n := map[string]*int{"seq": &s.seq, "attempts": &s.attempts, "ok": &s.ok, "refused": &s.refused, "failed": &s.failed}
	for _, f := range strings.Fields(strings.TrimPrefix(line, "dbapp: ")) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "user":
			s.user = v
		case "lastok":
			s.lastOK = v
		default:
			if p, ok := n[k]; ok {
				i, err := strconv.Atoi(v)
				if err != nil {
					return appStats{}, false
				}
				*p = i
			}
		}
	}
	return s, true
}

// await waits until the app's last count line satisfies cond, failing at
// once when its Pod has ended.
func (a *dbapp) await(t *testing.T, what string, timeout time.Duration, cond func(appStats) bool) appStats {
	t.Helper()
	var last appStats
	err := testenv.WaitFor(context.Background(), timeout, func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: a.pod}, p); err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return testenv.Permanent(fmt.Errorf("the app's Pod ended (%s): %+v", p.Status.Phase, p.Status.ContainerStatuses))
		}
		s, ok := a.stats()
		if !ok {
			return fmt.Errorf("no count line from the app yet (Pod %s %v)", p.Status.Phase, p.Status.ContainerStatuses)
		}
		if last = s; !cond(s) {
			return testenv.ErrNotYet
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v; the app's last counts %+v, its output ends:\n%s", what, err, last, a.tail(15))
	}
	return last
}

// snapshot is the app's counts from a line it printed after this call:
// they include every login it tried until now.
func (a *dbapp) snapshot(t *testing.T) appStats {
	t.Helper()
	s, _ := a.stats()
	return a.await(t, "the app reports its counts again", 30*time.Second, func(n appStats) bool { return n.seq > s.seq })
}
