// Command bench measures the provider against the real local components
// (PostgreSQL with TLS, OpenBao with Kubernetes auth, kube-apiserver; see
// internal/testenv) and prints a table (docs/performance.md explains it):
//
//   - the floor: a straight-line program doing, per tenant and in sequence,
//     exactly the external work of a Create with the provider's own clients,
//     and N CREATE DATABASE statements alone, each beside a plain pgx
//     loop's in the same run (plain.go), so a floor that pays more than
//     the plain loop for the same statement shows;
//   - the provider, built from this tree and run as a separate process: N
//     Databases created at once, time until all are Ready, for each
//     --max-reconcile-rate asked for, as a ratio to the floor;
//   - steady state once all are Ready: PostgreSQL connections per poll
//     (the server's log_connections), statements per Observe
//     (log_statement=all during the window only), OpenBao requests per
//     Observe (a file audit device during the window only), the provider's
//     CPU seconds per poll and RSS (/proc).
//
// Every provider run and every floor run gets fresh components, so no run
// inherits another's catalog, records or objects, and prints the server's
// settings a CREATE DATABASE's cost depends on. Everything started is
// stopped on exit, also on SIGINT/SIGTERM.
//
//	go run ./test/bench                      # N=50,200; rates default(10),25,50,100
//	go run ./test/bench -large               # also N=1000
//	go run ./test/bench -n 50 -rates 10 -poll 20s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

type cfg struct {
	ns         []int
	rates      []int
	largeRates []int
	poll       time.Duration
	window     time.Duration
	settle     time.Duration
	floor      bool
	logDir     string
	out        string
	pprof      time.Duration
	extra      []string
	tenants    tenantCfg
	steadyN    int
	steadyTmp  string
	drainMax   time.Duration
	idle       time.Duration
}

func main() {
	var c cfg
	n := flag.String("n", "50,200", "Comma-separated numbers of Databases.")
	large := flag.Bool("large", false, "Also run N=1000 (with -large-rates).")
	rates := flag.String("rates", "10,25,50,100", "Comma-separated --max-reconcile-rate values; 10 is the provider's default and is run without the flag. The first one also measures the steady state.")
	largeRates := flag.String("large-rates", "50", "--max-reconcile-rate values for N=1000; the first one also measures the steady state.")
	flag.DurationVar(&c.poll, "poll", 30*time.Second, "The provider's --poll in every run (shorter than its 1m default, so a steady-state window of several polls stays short).")
	flag.DurationVar(&c.window, "window", 0, "Steady-state window (default 2 × -poll).")
	flag.DurationVar(&c.settle, "settle", 10*time.Second, "Wait after all are Ready before the steady-state window.")
	flag.DurationVar(&c.drainMax, "drain-max", 90*time.Minute, "After the settle, wait at most this long for the Database controller to catch up with its polls (its work queue short and the wait in it under a second) before the steady-state window; 0: do not wait.")
	flag.DurationVar(&c.idle, "idle", time.Minute, "After the steady-state window, stop the provider and measure what the components use without it for this long (their own cost of holding N databases); 0: off.")
	flag.BoolVar(&c.floor, "floor", true, "Run the floor.")
	flag.StringVar(&c.logDir, "logs", "_output/bench", "Directory for the provider logs and the results.")
	flag.StringVar(&c.out, "out", "", "Also write the results table to this file (default <logs>/results.md).")
	flag.DurationVar(&c.pprof, "pprof", 0, "Profile the provider for this long from the moment the Databases are created: a CPU profile and a goroutine dump halfway, in the -logs directory (0: off). Read them with `go tool pprof -top`.")
	extraFlags := flag.String("provider-flags", "", "Extra flags for the provider, space-separated (e.g. to try a setting).")
	flag.IntVar(&c.steadyN, "steady-n", 0, "Also create this many Databases with the provider's default flags and poll and measure the steady state (e.g. 10000; needs about 9 MiB of disk per Database in TMPDIR; 0: off).")
	flag.StringVar(&c.steadyTmp, "steady-tmpdir", "", "Keep the -steady-n run's components in this directory instead of TMPDIR (e.g. the compressed filesystem hack/bench-fs.sh makes), so the other runs stay on the plain disk.")
	databases := flag.Bool("databases", true, "Run the Database-level measurements (-n, -rates); -databases=false with -tenants runs only the Tenant ones.")
	flag.BoolVar(&c.tenants.enabled, "tenants", false, "Also measure Tenants on the full stack (Crossplane core and functions, ESO, OpenBao, PostgreSQL, the provider): latency one at a time, and -tenant-n at once against a floor.")
	flag.IntVar(&c.tenants.runs, "tenant-runs", 20, "Tenants timed one at a time (-tenants).")
	tenantN := flag.String("tenant-n", "200", "Comma-separated numbers of Tenants created at once (-tenants); 0: none.")
	tenantsLarge := flag.Bool("tenants-large", false, "Also create 1000 Tenants at once (-tenants).")
	flag.BoolVar(&c.tenants.floor, "tenant-floor", true, "Run the Tenant floor for each -tenant-n.")
	flag.DurationVar(&c.tenants.poll, "tenant-poll", time.Minute, "The provider's --poll in Tenant runs (default: the provider's default).")
	flag.DurationVar(&c.tenants.idle, "tenants-idle", 0, "After the largest Tenant wave has every Secret (and the logins are checked), leave its Tenants alone for this long and report renders per Tenant per hour, CPU per minute by component, apiserver requests per minute by request and by client, OpenBao requests and ESO syncs per minute (e.g. 10m; 0: off).")
	flag.DurationVar(&c.tenants.idleSettle, "tenants-idle-settle", time.Minute, "Wait this long after the wave's checks before the idle window (-tenants-idle).")
	flag.BoolVar(&c.tenants.apiAudit, "api-audit", true, "Tenant runs: give kube-apiserver an audit log (Metadata level) to count its requests by client; it costs the apiserver a log write per request.")
	esoFlags := flag.String("eso-flags", "", "Tenant runs: extra flags for the External Secrets Operator, space-separated, after the harness's own (e.g. --concurrent=8).")
	flag.Parse()
	c.extra = strings.Fields(*extraFlags)
	c.tenants.esoArgs = strings.Fields(*esoFlags)
	var err error
	if c.ns, err = ints(*n); err != nil {
		fatal(err)
	}
	if *large {
		c.ns = append(c.ns, 1000)
	}
	if c.rates, err = ints(*rates); err != nil {
		fatal(err)
	}
	if c.largeRates, err = ints(*largeRates); err != nil {
		fatal(err)
	}
	if *tenantN != "0" {
		if c.tenants.ns, err = ints(*tenantN); err != nil {
			fatal(err)
		}
	}
	if *tenantsLarge {
		c.tenants.ns = append(c.tenants.ns, 1000)
	}
	if !*databases {
		c.ns = nil
	}
	if c.window == 0 {
		c.window = 2 * c.poll
	}
	if c.out == "" {
		c.out = filepath.Join(c.logDir, "results.md")
	}
	// controller-runtime's envtest logs through a logger nobody reads.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		stop()
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("not a positive number: %q", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list %q", s)
	}
	return out, nil
}

// defaultRate is the provider's --max-reconcile-rate default.
const defaultRate = 10

type provResult struct {
	N, Rate int
	Ready   time.Duration
	// Reconciles of the Database controller until all were Ready.
	Reconciles float64
	// Each is when each Database was first seen Ready, sorted.
	Each []time.Duration
	// PG counts the server's new connections until all were Ready.
	PG pgCounts
	// Ctrl is the controller's metrics over the same interval.
	Ctrl ctrlSample
	// HWM is the provider's peak RSS until all were Ready.
	HWM int64
	// CPU used by each component until all were Ready.
	CPU    cpuShare
	Steady *steadyResult
	// Server is the PostgreSQL server's settings.
	Server serverInfo
}

type steadyResult struct {
	Window, Poll time.Duration
	PG           pgCounts
	Bao          baoCounts
	BaoErr       error
	CPU          time.Duration
	// All is the CPU each component used in the window.
	All        cpuShare
	RSS, HWM   int64
	Reconciles float64
	// Ctrl is the provider's metrics over the window (apiserver requests,
	// credential checks, the rate limit in effect).
	Ctrl ctrlSample
	// CaughtUp is how long after all were Ready (settle included) the
	// controller had caught up with its polls; Behind, that it had not
	// within -drain-max.
	CaughtUp time.Duration
	Behind   bool
	// Idle is what each component used with the provider stopped, over
	// IdleWall.
	Idle     cpuShare
	IdleWall time.Duration
}

func (s *steadyResult) polls() float64 { return s.Window.Seconds() / s.Poll.Seconds() }

func run(ctx context.Context, c cfg) error {
	if err := os.MkdirAll(c.logDir, 0o750); err != nil {
		return err
	}
	logDir, err := filepath.Abs(c.logDir)
	if err != nil {
		return err
	}
	fmt.Printf("==> building the provider (%s, %d CPUs)\n", runtime.Version(), runtime.NumCPU())
	bin, err := buildProvider(ctx, logDir)
	if err != nil {
		return err
	}
	floors := map[int]*floorResult{}
	var provs []*provResult
	started := time.Now()
	for _, n := range c.ns {
		if c.floor {
			fmt.Printf("==> floor, N=%d (fresh components)\n", n)
			f, err := withEnv(ctx, dbStack, func(b *benchEnv) (*floorResult, error) { return runFloor(ctx, b, n) })
			if err != nil {
				return fmt.Errorf("floor N=%d: %w", n, err)
			}
			floors[n] = f
			fmt.Printf("    floor %s (%.1f ms/tenant), CREATE DATABASE alone %s; plain loop %s (%.1f ms/tenant), CREATE DATABASE alone %s\n",
				f.Total.Round(time.Millisecond), ms(f.Total)/float64(n), f.CreateDBOnly.Round(time.Millisecond),
				f.PlainTotal.Round(time.Millisecond), ms(f.PlainTotal)/float64(n), f.CreateDBOnlyPlain.Round(time.Millisecond))
			fmt.Printf("    %s\n", f.Activity)
		}
		rates := c.rates
		if n >= 1000 {
			rates = c.largeRates
		}
		for i, rate := range rates {
			fmt.Printf("==> provider, N=%d, --max-reconcile-rate=%s, --poll=%s (fresh components)\n", n, rateLabel(rate), c.poll)
			p, err := withEnv(ctx, dbStack, func(b *benchEnv) (*provResult, error) {
				return runProvider(ctx, c, b, bin, logDir, n, rate, i == 0)
			})
			if err != nil {
				return fmt.Errorf("provider N=%d rate %d: %w", n, rate, err)
			}
			provs = append(provs, p)
			line := fmt.Sprintf("    all Ready after %s", p.Ready.Round(time.Millisecond))
			if f := floors[n]; f != nil {
				line += fmt.Sprintf(" = %.2f× the floor", p.Ready.Seconds()/f.Total.Seconds())
			}
			fmt.Println(line)
		}
	}
	// Each stage writes the report so far, so a later stage that fails
	// (or a run stopped during the long one at scale) loses nothing.
	var tenantReport string
	report := func(failed error) error {
		r := table(c, floors, provs, time.Since(started)) + tenantReport
		if failed != nil {
			r += fmt.Sprintf("\n**The run stopped early:** %v\n", failed)
		}
		return os.WriteFile(c.out, []byte(r), 0o644) //nolint:gosec // the report, meant to be read and shared
	}
	if c.tenants.enabled {
		var terr error
		tenantReport, terr = runTenants(ctx, c, bin, logDir)
		if terr != nil {
			return errors.Join(terr, report(terr))
		}
		if err := report(nil); err != nil {
			return err
		}
	}
	if c.steadyN > 0 {
		p, err := runScale(ctx, c, bin, logDir, c.steadyN)
		if err != nil {
			err = fmt.Errorf("provider at scale N=%d: %w", c.steadyN, err)
			return errors.Join(err, report(err))
		}
		provs = append(provs, p)
		fmt.Printf("    all Ready after %s\n", p.Ready.Round(time.Millisecond))
	}
	fmt.Println()
	fmt.Println(table(c, floors, provs, time.Since(started)) + tenantReport)
	return report(nil)
}

// withEnv runs fn against fresh components and stops them afterwards.
func withEnv[T any](ctx context.Context, o testenv.Options, fn func(*benchEnv) (T, error)) (T, error) {
	var zero T
	b, err := startEnv(ctx, o)
	if err != nil {
		return zero, err
	}
	defer b.stop()
	fmt.Printf("    server: %s\n", b.server)
	// Let the components finish starting (the apiserver's CRD
	// controllers, OpenBao's KV upgrade) before anything is timed.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return zero, err
	}
	return fn(b)
}

func rateLabel(rate int) string {
	if rate == defaultRate {
		return "10 (default)"
	}
	return strconv.Itoa(rate)
}

func runProvider(ctx context.Context, c cfg, b *benchEnv, bin, logDir string, n, rate int, steady bool) (*provResult, error) {
	r := &provResult{N: n, Rate: rate, Server: b.server}
	flagRate := rate
	if rate == defaultRate {
		flagRate = 0 // the provider's default: no flag
	}
	logFile := filepath.Join(logDir, fmt.Sprintf("provider-n%d-rate%d.log", n, rate))
	p, err := startProvider(ctx, b, bin, logFile, c.poll, flagRate, c.pprof > 0, c.extra)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	if err := applyConfig(ctx, b, p); err != nil {
		return nil, err
	}
	if err := waitControllerStarted(ctx, p); err != nil {
		return nil, err
	}
	ctrl0 := scrapeController(p.Metrics)
	pgOff := fileSize(b.Postgres.LogFile())
	cpu0 := sampleCPU()
	t0 := time.Now()
	var profiled <-chan error
	if c.pprof > 0 {
		profiled = profile(ctx, p.Pprof, logDir, fmt.Sprintf("n%d-rate%d", n, rate), c.pprof)
	}
	if err := createDatabases(ctx, b, n); err != nil {
		return nil, err
	}
	timeout := 5*time.Minute + time.Duration(n)*time.Second
	seen := map[string]time.Time{}
	tReady, err := waitAllReady(ctx, b, p, n, timeout, seen)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, describeNotReady(ctx, b))
	}
	r.Ready = tReady.Sub(t0)
	for _, at := range seen {
		r.Each = append(r.Each, at.Sub(t0))
	}
	sort.Slice(r.Each, func(i, j int) bool { return r.Each[i] < r.Each[j] })
	r.CPU = sampleCPU().sub(cpu0)
	r.Ctrl = scrapeController(p.Metrics).sub(ctrl0)
	if lines, err := readRange(b.Postgres.LogFile(), pgOff, fileSize(b.Postgres.LogFile())); err == nil {
		r.PG = countPG(lines, b.Postgres.AdminUser, b.Postgres.SuperUser)
	}
	r.Reconciles = r.Ctrl.Reconciles()
	if s, err := readProc(p.Pid()); err == nil {
		r.HWM = s.HWM
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return nil, fmt.Errorf("profiling the provider: %w", err)
		}
		fmt.Printf("    profiles: %s/{cpu,goroutines}-n%d-rate%d.*\n", logDir, n, rate)
	}
	if !steady {
		return r, nil
	}

	fmt.Printf("    all Ready after %s; steady state: settling %s, then a %s window (%.0f polls)\n",
		r.Ready.Round(time.Millisecond), c.settle, c.window, c.window.Seconds()/c.poll.Seconds())
	if err := sleep(ctx, c.settle); err != nil {
		return nil, err
	}
	s := &steadyResult{Window: c.window, Poll: c.poll}
	if c.drainMax > 0 {
		caught, err := waitCaughtUp(ctx, p.Metrics, n, c.drainMax)
		if err != nil {
			return nil, err
		}
		s.Behind = !caught
		s.CaughtUp = time.Since(tReady)
	}
	// Statement logging only for the window, so it does not weigh on the
	// creation timings.
	if err := b.setServer(ctx, map[string]string{"log_statement": "all"}); err != nil {
		return nil, err
	}
	audit := startAudit(ctx, b)
	off := fileSize(b.Postgres.LogFile())
	p0, err := readProc(p.Pid())
	if err != nil {
		return nil, err
	}
	ctrlW := scrapeController(p.Metrics)
	cpuW := sampleCPU()
	if err := sleep(ctx, c.window); err != nil {
		return nil, err
	}
	s.All = sampleCPU().sub(cpuW)
	s.Ctrl = scrapeController(p.Metrics).sub(ctrlW)
	pgEnd := fileSize(b.Postgres.LogFile())
	audit.mark()
	p1, err := readProc(p.Pid())
	if err != nil {
		return nil, err
	}
	s.Reconciles = s.Ctrl.Reconciles()
	s.Bao, s.BaoErr = audit.stop()
	if err := b.setServer(ctx, map[string]string{"log_statement": "none"}); err != nil {
		return nil, err
	}
	lines, err := readRange(b.Postgres.LogFile(), off, pgEnd)
	if err != nil {
		return nil, err
	}
	s.PG = countPG(lines, b.Postgres.AdminUser, b.Postgres.SuperUser)
	s.CPU, s.RSS, s.HWM = p1.CPU-p0.CPU, p1.RSS, p1.HWM
	r.Steady = s
	if err := p.Exited(); err != nil {
		return nil, err
	}
	if c.idle > 0 {
		// What the servers cost on their own with N databases (PostgreSQL's
		// autovacuum visits every database that has seen activity), so the
		// window's numbers can be read as the provider's share.
		p.Stop()
		fmt.Printf("    provider stopped; measuring the components without it for %s\n", c.idle)
		cpuI := sampleCPU()
		if err := sleep(ctx, c.idle); err != nil {
			return nil, err
		}
		s.Idle, s.IdleWall = sampleCPU().sub(cpuI), c.idle
	}
	return r, nil
}

// ratio is a ÷ b, "–" when b is zero.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a.Seconds()/b.Seconds())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func table(c cfg, floors map[int]*floorResult, provs []*provResult, took time.Duration) string {
	var w strings.Builder
	host, _ := os.Hostname()
	scale := ""
	if c.steadyN > 0 {
		scale = fmt.Sprintf(" (the N=%d run: the provider's default flags, --poll=1m, a 2m window)", c.steadyN)
	}
	fmt.Fprintf(&w, "Measured %s on %s (%d CPUs, %s), --poll=%s, steady-state window %s%s; the run took %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), runtime.Version(), c.poll, c.window, scale, took.Round(time.Second))

	if len(floors) > 0 {
		fmt.Fprintf(&w, "Floor (sequential, one tenant after another)\n\n")
		fmt.Fprintf(&w, "| N | floor total | per tenant | CREATE DATABASE alone (N×) | %s | CPU s (all components; machine busy) |\n|---|---|---|---|%s---|\n",
			strings.Join(floorSteps, " | "), strings.Repeat("---|", len(floorSteps)))
		for _, n := range sortedKeys(floors) {
			f := floors[n]
			fmt.Fprintf(&w, "| %d | %.2f s | %.1f ms | %.2f s (%.1f ms each) |", n, f.Total.Seconds(), ms(f.Total)/float64(n), f.CreateDBOnly.Seconds(), ms(f.CreateDBOnly)/float64(n))
			for _, s := range floorSteps {
				fmt.Fprintf(&w, " %.1f ms (%.0f%%) |", ms(f.Steps[s])/float64(n), 100*f.Steps[s].Seconds()/f.Total.Seconds())
			}
			fmt.Fprintf(&w, " %s |\n", cpuCell(f.CPU, f.Total+f.PlainTotal))
			fmt.Fprintf(&w, "| %d | plain loop: %.2f s | %.1f ms | %.2f s (%.1f ms each) | – |", n, f.PlainTotal.Seconds(), ms(f.PlainTotal)/float64(n), f.CreateDBOnlyPlain.Seconds(), ms(f.CreateDBOnlyPlain)/float64(n))
			for _, s := range plainSteps {
				fmt.Fprintf(&w, " %.1f ms (%.0f%%) |", ms(f.Plain[s])/float64(n), 100*f.Plain[s].Seconds()/f.PlainTotal.Seconds())
			}
			fmt.Fprintf(&w, " (with the floor's) |\n")
		}
		fmt.Fprintln(&w)
		for _, n := range sortedKeys(floors) {
			f := floors[n]
			fmt.Fprintf(&w, "- N=%d: floor ÷ plain loop: per tenant without the OpenBao step %s×, CREATE DATABASE %s×, CREATE DATABASE alone %s×; server: %s; while the %d tenants were made: %s\n",
				n, ratio(f.Total-f.Steps["kv write+read"], f.PlainTotal), ratio(f.Steps["create database"], f.Plain["create database"]),
				ratio(f.CreateDBOnly, f.CreateDBOnlyPlain), f.Server, 2*n, f.Activity)
		}
		fmt.Fprintln(&w)
	}

	fmt.Fprintf(&w, "Provider: N Databases created at once, until all are Ready\n\n")
	fmt.Fprintf(&w, "| N | --max-reconcile-rate | all Ready | ratio to floor | first / 10%% / 50%% / 90%% Ready | reconciles (by result) | mean wait in queue / mean reconcile | peak RSS | CPU s (all components; machine busy) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range provs {
		ratio := "–"
		if f := floors[p.N]; f != nil {
			ratio = fmt.Sprintf("%.2f×", p.Ready.Seconds()/f.Total.Seconds())
		}
		fmt.Fprintf(&w, "| %d | %s | %.2f s | %s | %s | %.0f (%s) | %s | %.0f MiB | %s |\n", p.N, rateLabel(p.Rate), p.Ready.Seconds(), ratio, quantiles(p.Each), p.Reconciles, resultList(p.Ctrl.ByResult), waitWork(p.Ctrl), mib(p.HWM), cpuCell(p.CPU, p.Ready))
	}
	fmt.Fprintln(&w)
	for _, p := range provs {
		fmt.Fprintf(&w, "- N=%d rate %s, per Database until all were Ready: the provider's apiserver requests %s; new PostgreSQL connections: admin %.2f, tenant %.2f; server: %s\n",
			p.N, rateLabel(p.Rate), perDatabase(p.Ctrl.Requests, p.N), float64(p.PG.AdminConns)/float64(p.N), float64(p.PG.TenantConns)/float64(p.N), p.Server)
	}
	fmt.Fprintln(&w)

	fmt.Fprintf(&w, "Steady state (all Ready; per poll interval = window ÷ polls in it)\n\n")
	fmt.Fprintf(&w, "| N | rate | Observes in window (expected N×polls) | new admin conns / poll | new tenant conns / Database / poll | statements / Observe (admin + tenant) | OpenBao requests / Observe | provider CPU s / poll | RSS (peak) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var details []string
	for _, p := range provs {
		s := p.Steady
		if s == nil {
			continue
		}
		polls := s.polls()
		obs := float64(s.PG.Observes)
		per := func(v int) string {
			if obs == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", float64(v)/obs)
		}
		bao := per(s.Bao.Requests)
		if s.BaoErr != nil {
			bao = "n/a: " + s.BaoErr.Error()
		}
		fmt.Fprintf(&w, "| %d | %s | %d (%.0f) | %.1f | %.2f | %s (%s + %s) | %s | %.2f | %.0f MiB (%.0f MiB) |\n",
			p.N, rateLabel(p.Rate), s.PG.Observes, float64(p.N)*polls,
			float64(s.PG.AdminConns)/polls, float64(s.PG.TenantConns)/polls/float64(p.N),
			per(s.PG.AdminStmts+s.PG.TenantStmts), per(s.PG.AdminStmts), per(s.PG.TenantStmts),
			bao, s.CPU.Seconds()/polls, mib(s.RSS), mib(s.HWM))
		d := fmt.Sprintf("N=%d: %s%.0f reconciles in the window; CPU s in the window: %s; statements: %s; OpenBao: %s", p.N, caughtUpNote(s), s.Reconciles, cpuCell(s.All, s.Window), countList(s.PG.ByText), countList(s.Bao.ByOp))
		if s.IdleWall > 0 {
			d += fmt.Sprintf("; then, with the provider stopped, CPU s in %s: %s", s.IdleWall, cpuCell(s.Idle, s.IdleWall))
		}
		details = append(details, d)
	}
	fmt.Fprintln(&w)
	for _, d := range details {
		fmt.Fprintf(&w, "- %s\n", d)
	}
	fmt.Fprintln(&w)
	steadyScaleTable(&w, provs)
	return w.String()
}

// caughtUpNote says when the window started, relative to all Ready.
func caughtUpNote(s *steadyResult) string {
	switch {
	case s.Behind:
		return fmt.Sprintf("still behind its polls %s after all Ready (the window was taken anyway); ", s.CaughtUp.Round(time.Second))
	case s.CaughtUp > 0:
		return fmt.Sprintf("caught up with its polls %s after all Ready; ", s.CaughtUp.Round(time.Second))
	}
	return ""
}

// steadyScaleTable is the second steady-state table: whether every
// Database was observed in each poll interval, the load on the server, the
// apiserver and the rate limit in effect.
func steadyScaleTable(w *strings.Builder, provs []*provResult) {
	fmt.Fprintf(w, "Steady state, per Database and per poll (same windows)\n\n")
	fmt.Fprintf(w, "| N | --poll | Observes per Database in the window: min / max (never observed) | tenant logins on the server / min | login checks: logged in / skipped | credential record: read from OpenBao / kept in memory | provider apiserver requests / poll | reconcile rate limit in effect |\n|---|---|---|---|---|---|---|---|\n")
	for _, p := range provs {
		s := p.Steady
		if s == nil {
			continue
		}
		lo, hi := -1, 0
		for i := 0; i < p.N; i++ {
			n := s.PG.ObservesOf[databaseName(i)]
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		never := 0
		for i := 0; i < p.N; i++ {
			if s.PG.ObservesOf[databaseName(i)] == 0 {
				never++
			}
		}
		var req float64
		for _, v := range s.Ctrl.Requests {
			req += v
		}
		fmt.Fprintf(w, "| %d | %s | %d / %d (%d) | %.1f | %.0f / %.0f | %.0f / %.0f | %.1f (%s) | %.0f/s |\n",
			p.N, s.Poll, lo, hi, never, float64(s.PG.TenantConns)/s.Window.Minutes(),
			s.Ctrl.Checks["login"], s.Ctrl.Checks["skipped"], s.Ctrl.Records["openbao"], s.Ctrl.Records["memory"], req/s.polls(), byMethod(s.Ctrl.Requests, s.polls()), s.Ctrl.RateLimit)
	}
	fmt.Fprintln(w)
}

// cpuCell is "total (by component); machine busy% of 2 cores".
func cpuCell(c cpuShare, wall time.Duration) string {
	return fmt.Sprintf("%.1f (%s); %.0f%% of %d cores", c.total().Seconds(), c, 100*c.Busy.Seconds()/wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
}

// quantiles is "first / 10% / 50% / 90%" of sorted durations, in seconds.
func quantiles(d []time.Duration) string {
	if len(d) == 0 {
		return "–"
	}
	q := func(f float64) float64 { return d[int(f*float64(len(d)-1))].Seconds() }
	return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f s", d[0].Seconds(), q(0.1), q(0.5), q(0.9))
}

// perDatabase is "METHOD x.x, ..." of counts divided by n.
func perDatabase(m map[string]float64, n int) string {
	keys := make([]string, 0, len(m))
	var total float64
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
			total += v
		}
	}
	sort.Strings(keys)
	parts := []string{fmt.Sprintf("%.1f", total/float64(n))}
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]/float64(n)))
	}
	return strings.Join(parts, "; ")
}

// byMethod is "METHOD x.x, ..." of the non-zero counts divided by d.
func byMethod(m map[string]float64, d float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]/d))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// resultList is "N result, ..." for the non-zero results.
func resultList(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"success", "requeue", "requeue_after", "error"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%.0f %s", m[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

// waitWork is the mean time an item waited in the workqueue and the mean
// time a reconcile took.
func waitWork(c ctrlSample) string {
	if c.QueueCount <= 0 || c.WorkCount <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f ms / %.0f ms", 1000*c.QueueSum/c.QueueCount, 1000*c.WorkSum/c.WorkCount)
}

func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× `%s`", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
