// Command dbapp is the test app of the rotation proof on the test node
// (test/e2e): it logs in to PostgreSQL the way an app given its
// credential as a mounted Secret does. Every interval it reads the
// Secret's files afresh (username, password, host, hostaddr, port,
// database, sslmode), opens a new connection with them, verifies the
// server's certificate against the CA file (sslmode verify-full, libpq's
// meaning: the connection goes to hostaddr, the certificate must name
// host), asks the server who it is and closes the connection. It counts
// the attempts, the logins the server refused (SQLSTATE class 28: a wrong
// password, a role that may not log in) and the other failures, and prints
// them once per report period as one line:
//
//	dbapp: seq=12 elapsed=12.0s attempts=110 ok=110 refused=0 failed=0 user=a_app_1 lastok=a_app_1
//
// user is the username the Secret named at the last attempt, lastok the one
// of the last login that succeeded. It prints a line when the Secret's
// username changes and one at the start of each run of refused logins. It
// never prints a password.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// credential is what the mounted Secret holds.
type credential struct {
	username, password, host, hostaddr, port, database, sslmode string
}

// keys are the Secret's keys the app reads, each a file of the mount.
var keys = []string{"username", "password", "host", "hostaddr", "port", "database", "sslmode"}

// readCredential reads the Secret's files as one version. The kubelet
// writes a Secret volume atomically: the files are links through the
// directory's "..data" link, which it swaps to a new directory when the
// Secret changes. Files read one by one can straddle a swap (a new
// username with the old password); so the link is read before and after
// the files, and the files again when it changed in between.
func readCredential(dir string) (credential, error) {
	var err error
	for range 10 {
		before, lerr := os.Readlink(filepath.Join(dir, "..data"))
		var v map[string]string
		if v, err = readFiles(dir); err != nil {
			continue
		}
		after, _ := os.Readlink(filepath.Join(dir, "..data"))
		if lerr == nil && before != after {
			err = errors.New("the Secret's files changed while read")
			continue
		}
		return credential{username: v["username"], password: v["password"], host: v["host"], hostaddr: v["hostaddr"],
			port: v["port"], database: v["database"], sslmode: v["sslmode"]}, nil
	}
	return credential{}, err
}

func readFiles(dir string) (map[string]string, error) {
	v := map[string]string{}
	for _, k := range keys {
		b, err := os.ReadFile(filepath.Join(dir, k)) //nolint:gosec // the mounted Secret's files
		if err != nil {
			return nil, err
		}
		v[k] = strings.TrimSpace(string(b))
	}
	return v, nil
}

// quote makes a libpq key/value connection-string value.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// login opens a new connection with c, checks that the server took it as
// c.username and closes it.
func login(ctx context.Context, c credential, caFile string) error {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=%s sslrootcert=%s application_name=dbapp",
		quote(c.host), quote(c.port), quote(c.database), quote(c.username), quote(c.sslmode), quote(caFile)))
	if err != nil {
		return err
	}
	// The password is set on the parsed config, never in a string that
	// an error could quote.
	cfg.Password = c.password
	if c.hostaddr != "" {
		// libpq's hostaddr: connect there without a lookup; the
		// certificate is still verified against host.
		addr := c.hostaddr
		cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{addr}, nil }
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background()) //nolint:errcheck // a closed connection is all the app wants
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		return err
	}
	if user != c.username {
		return fmt.Errorf("logged in as %q, not as the Secret's %q", user, c.username)
	}
	return nil
}

// refusal is the SQLSTATE of a login the server refused (class 28,
// invalid authorization), or "" when err is something else.
func refusal(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28") {
		return pe.Code
	}
	return ""
}

// app is the login loop's state and counts.
type app struct {
	dir, caFile    string
	connectTimeout time.Duration
	printf         func(format string, args ...any)
	start          time.Time
	seq            int

	attempts, ok, refused, failed int
	// user is the username the Secret named at the last attempt, lastOK
	// the one of the last login that succeeded.
	user, lastOK string
	// refusing: the last attempt was refused, as lastRefusedUser with
	// lastRefusedCode; lastFailure is the last other failure printed.
	refusing                         bool
	lastRefusedUser, lastRefusedCode string
	lastFailure                      string
}

// attempt is one login with the Secret as it is now.
func (a *app) attempt() {
	a.attempts++
	c, err := readCredential(a.dir)
	if err != nil {
		a.failed++
		a.noteFailure("reading the Secret: " + err.Error())
		return
	}
	if c.username != a.user {
		a.printf("dbapp: the Secret names user=%s (was %q)", c.username, a.user)
		a.user = c.username
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.connectTimeout)
	err = login(ctx, c, a.caFile)
	cancel()
	switch code := refusal(err); {
	case err == nil:
		a.ok++
		a.lastOK = c.username
		if a.refusing {
			a.printf("dbapp: logged in again as user=%s", c.username)
		}
		a.refusing = false
	case code != "":
		a.refused++
		if !a.refusing || a.lastRefusedUser != c.username || a.lastRefusedCode != code {
			a.printf("dbapp: login refused user=%s sqlstate=%s: %s", c.username, code, err.Error())
		}
		a.refusing, a.lastRefusedUser, a.lastRefusedCode = true, c.username, code
	default:
		a.failed++
		a.noteFailure(err.Error())
	}
}

// noteFailure prints a failure other than a refused login when it differs
// from the last one printed.
func (a *app) noteFailure(msg string) {
	if msg != a.lastFailure {
		a.printf("dbapp: login failed: %s", msg)
		a.lastFailure = msg
	}
}

func (a *app) report() {
	a.seq++
	a.printf("dbapp: seq=%d elapsed=%.1fs attempts=%d ok=%d refused=%d failed=%d user=%s lastok=%s",
		a.seq, time.Since(a.start).Seconds(), a.attempts, a.ok, a.refused, a.failed, a.user, a.lastOK)
}

func main() {
	dir := flag.String("secret-dir", "/etc/db", "the directory the credential Secret is mounted at")
	caFile := flag.String("ca", "/etc/postgresql-ca/ca.crt", "the CA bundle that verifies the server")
	interval := flag.Duration("interval", 100*time.Millisecond, "how often to log in")
	every := flag.Duration("report", time.Second, "how often to print the counts")
	timeout := flag.Duration("connect-timeout", 5*time.Second, "how long one login may take")
	flag.Parse()
	a := &app{dir: *dir, caFile: *caFile, start: time.Now(), connectTimeout: *timeout,
		printf: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	tick, rep := time.NewTicker(*interval), time.NewTicker(*every)
	defer tick.Stop()
	defer rep.Stop()
	for {
		select {
		case <-stop:
			a.report()
			return
		case <-rep.C:
			a.report()
		case <-tick.C:
			a.attempt()
		}
	}
}
