package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// procSample is the provider process's CPU and memory from /proc.
type procSample struct {
	// CPU is user+system CPU time.
	CPU time.Duration
	// RSS and HWM (peak RSS) in bytes.
	RSS, HWM int64
}

func readProc(pid int) (procSample, error) {
	var s procSample
	st, ok := testenv.ReadProcStat(fmt.Sprintf("/proc/%d/stat", pid))
	if !ok {
		return s, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	s.CPU = time.Duration(st.UTime+st.STime) * testenv.ClockTick
	st2, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(st2), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			s.RSS = kb * 1024
		case "VmHWM":
			s.HWM = kb * 1024
		}
	}
	return s, nil
}

// ctrlSample is the Database controller's controller-runtime metrics at
// one moment: reconciles by result, and the workqueue's time-in-queue and
// time-in-reconcile sums, which separate waiting (rate limiters, back-off,
// busy workers) from working.
type ctrlSample struct {
	ByResult             map[string]float64
	Requests             map[string]float64 // the provider's apiserver requests by method (all controllers)
	Checks               map[string]float64 // credential checks by outcome (login, skipped)
	Records              map[string]float64 // where each Observe's credential record came from (openbao, memory)
	RateLimit            float64            // the global reconcile rate limit in effect (a gauge: not subtracted)
	Depth                float64            // items waiting in the Database controller's work queue (a gauge: not subtracted)
	QueueSum, QueueCount float64
	WorkSum, WorkCount   float64
}

func (a ctrlSample) sub(b ctrlSample) ctrlSample {
	d := ctrlSample{ByResult: map[string]float64{}, Requests: map[string]float64{}, Checks: map[string]float64{}, Records: map[string]float64{}, QueueSum: a.QueueSum - b.QueueSum, QueueCount: a.QueueCount - b.QueueCount,
		WorkSum: a.WorkSum - b.WorkSum, WorkCount: a.WorkCount - b.WorkCount, RateLimit: a.RateLimit, Depth: a.Depth}
	for k, v := range a.Checks {
		d.Checks[k] = v - b.Checks[k]
	}
	for k, v := range a.Records {
		d.Records[k] = v - b.Records[k]
	}
	for k, v := range a.ByResult {
		d.ByResult[k] = v - b.ByResult[k]
	}
	for k, v := range a.Requests {
		d.Requests[k] = v - b.Requests[k]
	}
	return d
}

// Reconciles is the number of reconciles of every result.
func (a ctrlSample) Reconciles() float64 {
	var sum float64
	for _, v := range a.ByResult {
		sum += v
	}
	return sum
}

// label returns the value of label k in a Prometheus text line.
func label(line, k string) string {
	i := strings.Index(line, k+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(k)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// scrapeController reads the Database controller's metrics from the
// provider's metrics endpoint (zero values when it cannot).
func scrapeController(addr string) ctrlSample {
	out := ctrlSample{ByResult: map[string]float64{}, Requests: map[string]float64{}, Checks: map[string]float64{}, Records: map[string]float64{}}
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback, short
	if err != nil {
		return out
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const ctrl = "managed/database."
	for sc.Scan() {
		l := sc.Text()
		i := strings.LastIndexByte(l, ' ')
		if i < 0 || strings.HasPrefix(l, "#") {
			continue
		}
		v, _ := strconv.ParseFloat(l[i+1:], 64)
		switch {
		case strings.HasPrefix(l, "controller_runtime_reconcile_total{") && strings.HasPrefix(label(l, "controller"), ctrl):
			out.ByResult[label(l, "result")] += v
		case strings.HasPrefix(l, "provider_postgresql_tenant_credential_checks_total{"):
			out.Checks[label(l, "check")] += v
		case strings.HasPrefix(l, "provider_postgresql_tenant_credential_record_reads_total{"):
			out.Records[label(l, "source")] += v
		case strings.HasPrefix(l, "provider_postgresql_tenant_reconcile_rate_limit "):
			out.RateLimit = v
		case strings.HasPrefix(l, "rest_client_requests_total{"):
			out.Requests[label(l, "method")] += v
		case strings.HasPrefix(l, "workqueue_depth{") && strings.HasPrefix(label(l, "name"), ctrl):
			out.Depth += v
		case strings.HasPrefix(l, "workqueue_queue_duration_seconds_sum{") && strings.HasPrefix(label(l, "name"), ctrl):
			out.QueueSum += v
		case strings.HasPrefix(l, "workqueue_queue_duration_seconds_count{") && strings.HasPrefix(label(l, "name"), ctrl):
			out.QueueCount += v
		case strings.HasPrefix(l, "workqueue_work_duration_seconds_sum{") && strings.HasPrefix(label(l, "name"), ctrl):
			out.WorkSum += v
		case strings.HasPrefix(l, "workqueue_work_duration_seconds_count{") && strings.HasPrefix(label(l, "name"), ctrl):
			out.WorkCount += v
		}
	}
	return out
}

// profile saves the provider's CPU profile of the next d and, halfway
// through, its goroutines (where the workers wait), into dir.
func profile(ctx context.Context, pprofAddr, dir, tag string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	get := func(path, file string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close() //nolint:errcheck // read-only
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
		}
		f, err := os.Create(filepath.Join(dir, file)) //nolint:gosec // a file of the run's own log directory
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			f.Close() //nolint:errcheck // already failing
			return err
		}
		return f.Close()
	}
	go func() {
		gerr := make(chan error, 1)
		go func() {
			if err := sleep(ctx, d/2); err != nil {
				gerr <- err
				return
			}
			gerr <- get("/debug/pprof/goroutine?debug=1", "goroutines-"+tag+".txt")
		}()
		err := get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), "cpu-"+tag+".pprof")
		done <- errors.Join(err, <-gerr)
	}()
	return done
}

// waitControllerStarted waits until the Database controller runs (it is
// registered once its CRDs are seen): its workers appear in the metrics.
func waitControllerStarted(ctx context.Context, p *testenv.Provider) error {
	err := testenv.WaitFor(ctx, 60*time.Second, func(context.Context) error {
		resp, err := http.Get("http://" + p.Metrics + "/metrics") //nolint:noctx // loopback, short
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close() //nolint:errcheck // read-only
			if strings.Contains(string(b), `controller_runtime_active_workers{controller="managed/database.`) {
				return nil
			}
		}
		if err := p.Exited(); err != nil {
			return testenv.Permanent(err)
		}
		return testenv.ErrNotYet
	})
	if errors.Is(err, testenv.ErrNotYet) {
		return fmt.Errorf("the Database controller did not start within 60 s; provider log: %s", p.LogFile)
	}
	return err
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readRange returns the complete lines of path between byte offsets off
// and end.
func readRange(path string, off, end int64) ([]string, error) {
	lines, err := readFrom(path, off)
	var out []string
	pos := off
	for _, l := range lines {
		pos += int64(len(l)) + 1
		if pos > end {
			break
		}
		out = append(out, l)
	}
	return out, err
}

// readFrom returns the lines of path from byte offset off.
func readFrom(path string, off int64) ([]string, error) {
	f, err := os.Open(path) //nolint:gosec // our own environment's log
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// pgCounts is what the server log says about a window.
type pgCounts struct {
	// Connections authorized, by role class.
	AdminConns, TenantConns, OtherConns int
	// Statements logged by log_statement=all ("statement:" for simple
	// queries, "execute ...:" for extended-protocol executions), by role
	// class.
	AdminStmts, TenantStmts int
	// Observes: executions of the Observe catalog query (qObserve), one per
	// Observe on the admin pool.
	Observes int
	// ByText counts statements by their first line (for the report).
	ByText map[string]int
	// ObservesOf counts the Observe catalog queries per database name
	// (from the statement's parameters).
	ObservesOf map[string]int
}

var (
	reConnAuth = regexp.MustCompile(`LOG:  connection authorized: user=(\S+)`)
	reStmt     = regexp.MustCompile(`\] (\S*)@\S* LOG:  (?:statement|execute [^:]*): (.*)$`)
	// reParams is the parameters line after an extended-protocol
	// execution, with the server process's pid.
	reParams = regexp.MustCompile(`\[(\d+)\] \S* DETAIL:  [Pp]arameters: \$1 = '([^']*)'`)
	rePid    = regexp.MustCompile(`\[(\d+)\] `)
)

// observeQueryStart is how qObserve's first line starts in the log.
const observeQueryStart = "SELECT d.oid, pg_catalog.pg_get_userbyid(d.datdba)"

func countPG(lines []string, admin, super string) pgCounts {
	c := pgCounts{ByText: map[string]int{}, ObservesOf: map[string]int{}}
	// observing: server processes whose last statement was an Observe.
	observing := map[string]bool{}
	for _, l := range lines {
		if m := reParams.FindStringSubmatch(l); m != nil {
			if observing[m[1]] {
				c.ObservesOf[m[2]]++
				delete(observing, m[1])
			}
			continue
		}
		if m := reConnAuth.FindStringSubmatch(l); m != nil {
			switch m[1] {
			case admin:
				c.AdminConns++
			case super:
			default:
				if strings.HasPrefix(m[1], "t") {
					c.TenantConns++
				} else {
					c.OtherConns++
				}
			}
			continue
		}
		m := reStmt.FindStringSubmatch(l)
		if m == nil || m[1] == super {
			continue
		}
		text := m[2]
		if len(text) > 60 {
			text = text[:60]
		}
		who := "tenant"
		if m[1] == admin {
			who = "admin"
			c.AdminStmts++
			if strings.HasPrefix(m[2], observeQueryStart) {
				c.Observes++
				if p := rePid.FindStringSubmatch(l); p != nil {
					observing[p[1]] = true
				}
			}
		} else {
			c.TenantStmts++
		}
		c.ByText[who+": "+text]++
	}
	return c
}

// baoAudit is a file audit device enabled for a window. OpenBao 2.x
// refuses to enable audit devices through its API ("use declarative,
// config-based audit device management"), so the device is declared in the
// server's configuration file and the server is sent SIGHUP, which reloads
// audit devices; the original file is restored (and reloaded) afterwards.
type baoAudit struct {
	cfgFile  string
	original []byte
	file     string
	pid      int
	end      int64
	err      error
}

// startAudit declares a file audit device writing to a file in the
// environment's directory and waits until OpenBao has opened it.
func startAudit(ctx context.Context, b *benchEnv) *baoAudit {
	a := &baoAudit{cfgFile: filepath.Join(b.Dir, "openbao", "config.hcl"), file: filepath.Join(b.Dir, fmt.Sprintf("bao-audit-%d.log", time.Now().UnixNano()))}
	if a.original, a.err = os.ReadFile(a.cfgFile); a.err != nil {
		return a
	}
	if a.pid, a.err = pidWithArg("-config=" + a.cfgFile); a.err != nil {
		return a
	}
	stanza := fmt.Sprintf("\naudit \"file\" \"bench\" {\n  options {\n    file_path = %q\n  }\n}\n", a.file)
	if a.err = os.WriteFile(a.cfgFile, append(append([]byte{}, a.original...), stanza...), 0o600); a.err != nil { //nolint:gosec // the run's own OpenBao configuration file
		return a
	}
	if a.err = syscall.Kill(a.pid, syscall.SIGHUP); a.err != nil {
		return a
	}
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(a.file); err == nil {
			return a
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	a.err = fmt.Errorf("OpenBao did not open the audit file after SIGHUP")
	return a
}

// mark ends the window: later entries are not counted.
func (a *baoAudit) mark() { a.end = fileSize(a.file) }

// pidWithArg finds the process (one this benchmark started) with arg on its
// command line.
func pidWithArg(arg string) (int, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		b, err := os.ReadFile(p) //nolint:gosec // procfs
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				return strconv.Atoi(filepath.Base(filepath.Dir(p)))
			}
		}
	}
	return 0, fmt.Errorf("no process with argument %s", arg)
}

// baoCounts is what the audit log says about a window.
type baoCounts struct {
	// Requests by the provider (audit entries of type "request" on the KV
	// mount or the auth mount, excluding the harness's root-token calls).
	Requests int
	ByOp     map[string]int
}

// stop restores the configuration and counts the requests logged in the
// window.
func (a *baoAudit) stop() (baoCounts, error) {
	c := baoCounts{ByOp: map[string]int{}}
	if a.err != nil {
		return c, a.err
	}
	lines, err := readFrom(a.file, 0)
	if a.original != nil {
		if err := os.WriteFile(a.cfgFile, a.original, 0o600); err == nil {
			_ = syscall.Kill(a.pid, syscall.SIGHUP)
		}
	}
	if err != nil {
		return c, err
	}
	var read int64
	for _, l := range lines {
		read += int64(len(l)) + 1
		if read > a.end {
			break
		}
		var e struct {
			Type    string `json:"type"`
			Request struct {
				Operation string `json:"operation"`
				Path      string `json:"path"`
			} `json:"request"`
		}
		if json.Unmarshal([]byte(l), &e) != nil || e.Type != "request" {
			continue
		}
		if strings.HasPrefix(e.Request.Path, "sys/audit") {
			continue // the audit device's own reload
		}
		c.Requests++
		// Group by operation and the path's first two segments.
		segs := strings.SplitN(e.Request.Path, "/", 3)
		if len(segs) > 2 {
			segs = segs[:2]
		}
		c.ByOp[e.Request.Operation+" "+strings.Join(segs, "/")+"/…"]++
	}
	return c, nil
}

// cpuShare is CPU time by component: every process this benchmark started
// (kube-apiserver, etcd, bao, postgres with its backends, the provider)
// and the benchmark itself, plus the whole machine's busy time.
type cpuShare struct {
	By map[string]time.Duration
	// Busy is the machine's non-idle CPU time (all cores, /proc/stat),
	// including other users of the machine.
	Busy time.Duration
}

// sampleCPU attributes the CPU time of every descendant of this process
// (live ones, and exited ones reaped by their parent: cutime/cstime) to the
// component it belongs to (the direct child's command name).
func sampleCPU() cpuShare {
	procs := map[int]testenv.ProcStat{}
	children := map[int][]int{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if st, ok := testenv.ReadProcStat(p); ok {
			procs[pid] = st
			children[st.PPID] = append(children[st.PPID], pid)
		}
	}
	var total func(pid int) int64
	total = func(pid int) int64 {
		st := procs[pid]
		t := st.UTime + st.STime + st.CUTime + st.CSTime
		for _, c := range children[pid] {
			t += total(c)
		}
		return t
	}
	out := cpuShare{By: map[string]time.Duration{}}
	self := os.Getpid()
	me := procs[self]
	out.By["bench"] = time.Duration(me.UTime+me.STime) * testenv.ClockTick
	for _, c := range children[self] {
		name := procs[c].Comm
		if name == "go" || name == "" {
			continue
		}
		out.By[name] += time.Duration(total(c)) * testenv.ClockTick
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		var busy int64
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		out.Busy = time.Duration(busy) * testenv.ClockTick
	}
	return out
}

func (a cpuShare) sub(b cpuShare) cpuShare {
	out := cpuShare{By: map[string]time.Duration{}, Busy: a.Busy - b.Busy}
	for k, v := range a.By {
		out.By[k] = v - b.By[k]
	}
	return out
}

func (a cpuShare) total() time.Duration {
	var t time.Duration
	for _, v := range a.By {
		t += v
	}
	return t
}

func (a cpuShare) String() string {
	keys := make([]string, 0, len(a.By))
	for k := range a.By {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return a.By[keys[i]] > a.By[keys[j]] })
	var parts []string
	for _, k := range keys {
		if a.By[k] >= 50*time.Millisecond {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, a.By[k].Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}

// caughtUp reports whether the Database controller kept up with its polls
// between two samples of its metrics: few items waiting in its work queue
// (at most max(10, n/200)) and a mean wait in it under a second for the
// items taken in between.
func caughtUp(prev, cur ctrlSample, n int) bool {
	if cur.Depth > float64(max(10, n/200)) {
		return false
	}
	taken := cur.QueueCount - prev.QueueCount
	return taken <= 0 || (cur.QueueSum-prev.QueueSum)/taken < 1
}

// waitCaughtUp samples the provider's metrics every 15 s until caughtUp
// holds twice in a row, or limit has passed (false).
func waitCaughtUp(ctx context.Context, metrics string, n int, limit time.Duration) (bool, error) {
	const every = 15 * time.Second
	start := time.Now()
	prev := scrapeController(metrics)
	ok := 0
	for time.Since(start) < limit {
		if err := sleep(ctx, every); err != nil {
			return false, err
		}
		cur := scrapeController(metrics)
		if caughtUp(prev, cur, n) {
			ok++
		} else {
			ok = 0
		}
		if taken := cur.QueueCount - prev.QueueCount; ok == 0 && int(time.Since(start)/every)%4 == 0 && taken > 0 {
			fmt.Printf("    catching up: %.0f waiting in the queue, mean wait %.1f s (%s)\n",
				cur.Depth, (cur.QueueSum-prev.QueueSum)/taken, time.Since(start).Round(time.Second))
		}
		if ok == 2 {
			return true, nil
		}
		prev = cur
	}
	return false, nil
}
