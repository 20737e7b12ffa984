// Command testrun is `make test`: it builds every test binary once, then
// runs the whole suite on the default PostgreSQL major, the SQL packages on
// each other major and the rest of the PostgreSQL-facing packages on the
// majors the code branches at, several packages at a time, and ends with
// what failed.
//
// The work is a list of jobs, one per package and major. The packages on
// the test node run in node lanes (-node-lanes, each its own node, the
// second starting once the pool's jobs have all started or the CPU is
// partly idle; the matrix's test/e2e runs among them); every other job
// goes to a pool of -jobs workers; both take the longest jobs first (the
// durations of the last run, kept in the component cache's logs). Each
// job's output goes to a file of its own; the terminal gets a line as
// each job ends, the running jobs every minute, and at the end a table of
// every job and, last, each failed job with its failed tests and the end
// of its log, so that the last lines of a run name what failed.
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type job struct {
	pkg    string // import path
	dir    string // the package's directory
	major  string // PostgreSQL major; "" is the default
	run    string // -test.run, "" for every test
	node   bool   // runs in the node lane
	name   string // what the terminal and the durations file call it
	binary string

	start, end time.Time
	cpu        time.Duration // user and system time of the job's processes
	err        error
	log        string
}

func (j *job) key() string { return j.name }

type options struct {
	nodePkgs     []string
	matrixPkgs   []string
	sqlPkgs      []string
	majors       []string
	branchMajors map[string]bool
	matrixE2E    string
	// oldestPkgs run again on the oldest major, only their tests that
	// oldestRun matches: drills of documents whose steps differ there.
	oldestPkgs  []string
	oldestRun   string
	jobs        int
	poolNice    int
	timeout     time.Duration
	nodeTimeout time.Duration
	nodeLanes   int
	outDir      string
	durations   string
	only        string
	measured    string
	// tmpBase is where each run makes its jobs' TMPDIR ("": the
	// default), tmpDir that directory.
	tmpBase, tmpDir string
}

func main() {
	var o options
	var nodePkgs, matrixPkgs, sqlPkgs, majors, branchMajors, oldestPkgs string
	flag.StringVar(&nodePkgs, "node-pkgs", "./test/pod/ ./test/install/ ./test/upgrade/ ./test/e2e/ ./test/soak/", "the packages on the test node (their jobs run in the node lanes)")
	flag.StringVar(&matrixPkgs, "matrix-pkgs", "", "the packages run again on each of -majors (patterns go list takes)")
	flag.StringVar(&sqlPkgs, "sql-pkgs", "", "the packages run on each of -majors (patterns go list takes): where the SQL is proven statement by statement")
	flag.StringVar(&majors, "majors", "14 15 16 18", "the PostgreSQL majors of the matrix, besides the default: -sql-pkgs run on each")
	flag.StringVar(&branchMajors, "branch-majors", "", "the majors of -majors on which -matrix-pkgs and -matrix-e2e run too (empty: all of -majors)")
	flag.StringVar(&o.matrixE2E, "matrix-e2e", "", "the test/e2e tests run again on each branch major (a -run pattern; empty: none)")
	flag.StringVar(&oldestPkgs, "oldest-pkgs", "", "packages whose -oldest-run tests run again on the oldest of -majors (patterns go list takes)")
	flag.StringVar(&o.oldestRun, "oldest-run", "", "the tests of -oldest-pkgs run on the oldest major (a -run pattern; empty: none)")
	flag.IntVar(&o.jobs, "jobs", 4, "packages run at once besides the node lanes")
	flag.IntVar(&o.nodeLanes, "node-lanes", 2, "test nodes run at once, each running the node packages' jobs one after another")
	flag.IntVar(&o.poolNice, "pool-nice", 10, "the niceness of the pool's jobs: the node lane, the critical path, gets the CPU first (0: none)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "the timeout of one package's run")
	flag.DurationVar(&o.nodeTimeout, "node-timeout", 60*time.Minute, "the timeout of one node package's run")
	flag.StringVar(&o.outDir, "out", "_output/test", "where the test binaries and each job's log go")
	flag.StringVar(&o.tmpBase, "tmp", defaultTmpBase(), "where the jobs' temporary files go (their TMPDIR, a directory of the run's made here): the servers' data and the nodes' images on a RAM file system spare the disk's writeback, about a fifth of the tests' CPU (\"\": the system's TMPDIR)")
	flag.StringVar(&o.durations, "durations", "", "the file with the last run's durations (default: in the component cache's logs)")
	flag.StringVar(&o.only, "only", "", "run only the jobs whose name matches this pattern")
	flag.StringVar(&o.measured, "measured", "hack/testrun/durations.json", "the committed durations a whole run refreshes (\"\": none)")
	flag.Parse()
	o.nodePkgs, o.matrixPkgs, o.sqlPkgs, o.majors = strings.Fields(nodePkgs), strings.Fields(matrixPkgs), strings.Fields(sqlPkgs), strings.Fields(majors)
	o.oldestPkgs = strings.Fields(oldestPkgs)
	if bm := strings.Fields(branchMajors); len(bm) > 0 {
		o.branchMajors = map[string]bool{}
		for _, m := range bm {
			o.branchMajors[m] = true
		}
	}
	if o.durations == "" {
		o.durations = filepath.Join(cacheDir(), "logs", "test-durations.json")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o))
}

func cacheDir() string {
	if d := os.Getenv("PPT_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "provider-postgresql-tenant")
}

func say(format string, a ...any) {
	fmt.Printf("[testrun %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func run(ctx context.Context, o options) int {
	t0 := time.Now()
	if err := os.MkdirAll(filepath.Join(o.outDir, "logs"), 0o750); err != nil {
		say("%v", err)
		return 1
	}
	jobs, err := plan(ctx, o)
	if err != nil {
		say("%v", err)
		return 1
	}
	if o.tmpBase != "" {
		if o.tmpDir, err = makeTmpDir(o.tmpBase); err != nil {
			say("%v", err)
			return 1
		}
		defer os.RemoveAll(o.tmpDir) //nolint:errcheck // best effort; the next run removes it otherwise
	}
	say("building %d test binaries", len(binaries(jobs)))
	if err := build(ctx, o, jobs); err != nil {
		say("building the test binaries failed: %v", err)
		return 1
	}
	lanes := max(1, o.nodeLanes)
	say("built in %s; running %d jobs: %d node lanes and %d at a time besides; logs in %s", since(t0), len(jobs), lanes, o.jobs, filepath.Join(o.outDir, "logs"))

	last := readDurations(o.durations)
	var node, pool []*job
	for _, j := range jobs {
		if j.node {
			node = append(node, j)
		} else {
			pool = append(pool, j)
		}
	}
	// Longest first (unknown ones first of all: they may be long), in
	// the node lanes as in the pool.
	longestFirst(node, last)
	longestFirst(pool, last)

	var mu sync.Mutex
	running := map[*job]time.Time{}
	finished := map[*job]bool{}
	var wg sync.WaitGroup
	do := func(j *job) {
		mu.Lock()
		running[j] = time.Now()
		mu.Unlock()
		execute(ctx, o, j)
		mu.Lock()
		delete(running, j)
		finished[j] = true
		n, left := len(finished), estimateLeft(node, pool, running, finished, last, lanes, o.jobs, time.Now())
		mu.Unlock()
		status := "ok  "
		if j.err != nil {
			status = "FAIL"
		}
		say("%s %-56s %6.0fs %5.0f CPU-s  [%d of %d jobs; %s in, about %s left]", status, j.name, j.end.Sub(j.start).Seconds(), j.cpu.Seconds(), n, len(jobs), since(t0), left)
	}
	nodeQueue := make(chan *job, len(node))
	for _, j := range node {
		nodeQueue <- j
	}
	close(nodeQueue)
	// The first node lane starts at once; the others once every pool job
	// has started or the CPU has been idle for a while, whichever comes
	// first (see whenIdle): on a machine whose CPU the pool beside one
	// node takes all of, a second node only slows every job down.
	poolStarted := make(chan struct{})
	idleCtx, stopIdle := context.WithCancel(ctx)
	defer stopIdle()
	cpuIdle := whenIdle(idleCtx)
	for i := 0; i < lanes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				select {
				case <-poolStarted:
				case <-cpuIdle:
					if i == 1 {
						say("the CPU is idle for %.0f%% of its time or more: node lanes besides the first start before the pool's last job", laneIdleShare*100)
					}
				}
			}
			for j := range nodeQueue {
				do(j)
			}
		}()
	}
	queue := make(chan *job)
	for i := 0; i < o.jobs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				do(j)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				mu.Lock()
				var names []string
				for j, start := range running {
					names = append(names, fmt.Sprintf("%s (%s)", j.name, since(start)))
				}
				n, left := len(finished), estimateLeft(node, pool, running, finished, last, lanes, o.jobs, time.Now())
				mu.Unlock()
				sort.Strings(names)
				say("%d of %d jobs done, %s in, about %s left; running: %s", n, len(jobs), since(t0), left, strings.Join(names, ", "))
			}
		}
	}()
	for _, j := range pool {
		queue <- j
	}
	close(queue)
	close(poolStarted)
	wg.Wait()
	close(done)

	writeDurations(o.durations, last, jobs)
	if o.only == "" && ctx.Err() == nil {
		// A whole run also refreshes the durations a clean machine's first
		// run orders its jobs by (committed beside this program): only
		// this run's jobs, so a removed one leaves no stale entry.
		writeDurations(o.measured, map[string]float64{}, jobs)
	}
	return report(jobs, t0)
}

// plan lists the jobs: every package with tests on the default major, and
// the matrix packages (and the matrix's test/e2e tests) on each major.
func plan(ctx context.Context, o options) ([]*job, error) {
	all, err := listPackages(ctx, "./...")
	if err != nil {
		return nil, err
	}
	nodes, err := listPackages(ctx, o.nodePkgs...)
	if err != nil {
		return nil, err
	}
	isNode := map[string]bool{}
	for _, p := range nodes {
		isNode[p.ImportPath] = true
	}
	var matrix, sql []pkg
	if len(o.matrixPkgs) > 0 {
		if matrix, err = listPackages(ctx, o.matrixPkgs...); err != nil {
			return nil, err
		}
	}
	if len(o.sqlPkgs) > 0 {
		if sql, err = listPackages(ctx, o.sqlPkgs...); err != nil {
			return nil, err
		}
	}
	var only *regexp.Regexp
	if o.only != "" {
		if only, err = regexp.Compile(o.only); err != nil {
			return nil, err
		}
	}
	var jobs []*job
	add := func(p pkg, major, run string) {
		j := &job{pkg: p.ImportPath, dir: p.Dir, major: major, run: run, node: isNode[p.ImportPath]}
		j.name = strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, p.Module.Path), "/")
		if j.name == "" {
			j.name = "."
		}
		if major != "" {
			j.name += " [PG " + major + "]"
		}
		j.binary = filepath.Join(o.outDir, "bin", strings.ReplaceAll(strings.TrimPrefix(p.ImportPath, p.Module.Path+"/"), "/", "_")+".test")
		if only == nil || only.MatchString(j.name) {
			jobs = append(jobs, j)
		}
	}
	// The node lane in the order given, the default major first.
	for _, p := range nodes {
		if p.hasTests() {
			add(p, "", "")
		}
	}
	for _, p := range all {
		if p.hasTests() && !isNode[p.ImportPath] {
			add(p, "", "")
		}
	}
	for _, m := range o.majors {
		// On every major the SQL packages; on a branch major (one the
		// code's branches on the major set apart from the default) the
		// rest of the matrix too.
		branch := o.branchMajors == nil || o.branchMajors[m]
		seen := map[string]bool{}
		for _, p := range sql {
			if p.hasTests() && !isNode[p.ImportPath] {
				seen[p.ImportPath] = true
				add(p, m, "")
			}
		}
		if !branch {
			continue
		}
		for _, p := range matrix {
			if p.hasTests() && !isNode[p.ImportPath] && !seen[p.ImportPath] {
				add(p, m, "")
			}
		}
		if o.matrixE2E != "" {
			for _, p := range nodes {
				if strings.HasSuffix(p.ImportPath, "/test/e2e") {
					add(p, m, o.matrixE2E)
				}
			}
		}
	}
	if oldest := oldestMajor(o.majors); len(o.oldestPkgs) > 0 && o.oldestRun != "" && oldest != "" {
		ps, err := listPackages(ctx, o.oldestPkgs...)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if p.hasTests() && !isNode[p.ImportPath] {
				add(p, oldest, o.oldestRun)
			}
		}
	}
	if len(jobs) == 0 {
		return nil, errors.New("no test jobs")
	}
	return jobs, nil
}

// oldestMajor is the lowest of majors ("" when none is a number).
func oldestMajor(majors []string) string {
	oldest, n := "", 0
	for _, m := range majors {
		if v, err := strconv.Atoi(m); err == nil && (oldest == "" || v < n) {
			oldest, n = m, v
		}
	}
	return oldest
}

type pkg struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
	Module       struct{ Path string }
}

func (p pkg) hasTests() bool { return len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 }

func listPackages(ctx context.Context, patterns ...string) ([]pkg, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-json"}, patterns...)...) //nolint:gosec // go list of the Makefile's patterns
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(patterns, " "), err)
	}
	var ps []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func binaries(jobs []*job) map[string]*job {
	m := map[string]*job{}
	for _, j := range jobs {
		if _, ok := m[j.binary]; !ok {
			m[j.binary] = j
		}
	}
	return m
}

// build compiles each package's test binary once (two at a time: a link
// takes most of a core), whatever number of majors runs it. Without go
// test's vet: make lint runs govet on the same code (test files too), and
// here its facts about every dependency were 78 CPU-seconds of the 2 min
// 14 s the build took, every job waiting for it.
func build(ctx context.Context, o options, jobs []*job) error {
	if err := os.MkdirAll(filepath.Join(o.outDir, "bin"), 0o750); err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 2)
	)
	for bin, j := range binaries(jobs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.CommandContext(ctx, "go", "test", "-c", "-vet=off", "-o", bin, j.pkg) //nolint:gosec // a package go list named
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w\n%s", j.pkg, err, out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// execute runs one job's binary in its package's directory, as go test
// does, its output to its log file.
func execute(ctx context.Context, o options, j *job) {
	j.start = time.Now()
	defer func() { j.end = time.Now() }()
	j.log = filepath.Join(o.outDir, "logs", strings.NewReplacer("/", "_", " ", "", "[", "-", "]", "").Replace(j.name)+".log")
	f, err := os.Create(j.log)
	if err != nil {
		j.err = err
		return
	}
	defer f.Close() //nolint:errcheck // written only
	timeout := o.timeout
	if j.node {
		timeout = o.nodeTimeout
	}
	bin, err := filepath.Abs(j.binary)
	if err != nil {
		j.err = err
		return
	}
	args := []string{"-test.v", "-test.count=1", "-test.timeout=" + timeout.String()}
	if j.run != "" {
		args = append(args, "-test.run="+j.run)
	}
	// A margin past the binary's own timeout, whose panic names the
	// running tests: killed only when that did not end it.
	cctx, cancel := context.WithTimeout(ctx, timeout+2*time.Minute)
	defer cancel()
	name := bin
	if !j.node && o.poolNice > 0 {
		// The pool's jobs end long before the node lane: they yield the
		// CPU to it, and their own children (the servers) inherit it.
		args = append([]string{"-n", strconv.Itoa(o.poolNice), bin}, args...)
		name = "nice"
	}
	cmd := exec.CommandContext(cctx, name, args...) //nolint:gosec // the test binary this run built
	cmd.Dir = j.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = os.Environ()
	if o.tmpDir != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+o.tmpDir)
	}
	if j.major != "" {
		// PPT_PG_MATRIX: the tests that prove nothing that depends on the
		// major skip themselves (testenv.MajorIndependent).
		cmd.Env = append(cmd.Env, "PG_MAJOR="+j.major, "PPT_PG_MATRIX="+j.major)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	_, _ = fmt.Fprintf(f, "# %s: %s %s (in %s)\n", j.name, name, strings.Join(args, " "), j.dir)
	j.err = cmd.Run()
	if cmd.ProcessState != nil {
		// The binary's and the servers' it waited for.
		j.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
}

// tmpfsMagic is the file system type statfs reports for a tmpfs.
const tmpfsMagic = 0x01021994

// defaultTmpBase is /dev/shm where it is a RAM file system, else "".
func defaultTmpBase() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic {
		return "/dev/shm"
	}
	return ""
}

// tmpPrefix names the runs' directories under the -tmp base.
const tmpPrefix = "ppt-test-"

// makeTmpDir makes this run's directory under base, recording the run's
// PID in it, after removing those of runs that no longer run (a run
// stopped by a signal leaves its directory, in memory).
func makeTmpDir(base string) (string, error) {
	old, _ := filepath.Glob(filepath.Join(base, tmpPrefix+"*"))
	for _, d := range old {
		b, err := os.ReadFile(filepath.Join(d, "pid")) //nolint:gosec // a run's own file
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && perr == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // that run still runs
		}
		_ = os.RemoveAll(d)
	}
	d, err := os.MkdirTemp(base, tmpPrefix)
	if err != nil {
		return "", err
	}
	return d, os.WriteFile(filepath.Join(d, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

var failedTest = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)

// failures are the failed tests a log names, innermost last.
func failures(log string) []string {
	f, err := os.Open(log) //nolint:gosec // a log this run wrote
	if err != nil {
		return nil
	}
	defer f.Close() //nolint:errcheck // read only
	var names []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if m := failedTest.FindStringSubmatch(s.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// failedBlocks are, for each top-level test that failed, its output from
// its "=== RUN" line to its "--- FAIL" line (the last n lines of it).
func failedBlocks(log string, n int) []string {
	b, err := os.ReadFile(log) //nolint:gosec // a log this run wrote
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	var blocks []string
	start := -1
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "=== RUN   ") && !strings.Contains(strings.TrimPrefix(l, "=== RUN   "), "/"):
			start = i
		case strings.HasPrefix(l, "--- FAIL: ") && start >= 0:
			from := start
			if i+1-from > n {
				from = i + 1 - n
			}
			blocks = append(blocks, strings.Join(lines[from:i+1], "\n"))
			start = -1
		}
	}
	return blocks
}

func tail(file string, n int) string {
	b, err := os.ReadFile(file) //nolint:gosec // a log this run wrote
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func report(jobs []*job, t0 time.Time) int {
	fmt.Println()
	say("every job: seconds, then CPU-seconds (the job's processes and the servers they waited for)")
	var failed []*job
	for _, j := range jobs {
		status := "ok"
		if j.err != nil {
			status = "FAIL"
			failed = append(failed, j)
		}
		fmt.Printf("  %-4s %-60s %6.0f %6.0f\n", status, j.name, j.end.Sub(j.start).Seconds(), j.cpu.Seconds())
	}
	if len(failed) == 0 {
		say("PASS: %d jobs in %s", len(jobs), since(t0))
		return 0
	}
	for _, j := range failed {
		fmt.Printf("\n=== FAIL %s (%v)\n", j.name, j.err)
		for _, b := range failedBlocks(j.log, 60) {
			fmt.Println(b)
		}
		fmt.Printf("--- the end of %s:\n%s\n", j.log, tail(j.log, 15))
	}
	fmt.Println()
	for _, j := range failed {
		tests := failures(j.log)
		what := "no test failed: the package itself (TestMain, a timeout or a crash); see its log"
		if len(tests) > 0 {
			what = strings.Join(tests, " ")
		}
		fmt.Printf("FAIL %s: %s (log: %s)\n", j.name, what, j.log)
	}
	say("FAIL: %d of %d jobs failed, in %s", len(failed), len(jobs), since(t0))
	return 1
}

func since(t time.Time) string { return time.Since(t).Round(time.Second).String() }

// unknownDuration is what a job no run has timed yet is taken to last.
const unknownDuration = 60.0

// estimateLeft is how long the run has still to go, from the last run's
// durations: the node jobs left spread over the lanes, the pool's spread
// over its workers, or the longest job left, whichever is longest. A
// running job counts what it has left of its last duration (nothing once
// past it).
func estimateLeft(node, pool []*job, running map[*job]time.Time, finished map[*job]bool, last map[string]float64, lanes, workers int, now time.Time) time.Duration {
	var longest float64
	left := func(js []*job) float64 {
		var sum float64
		for _, j := range js {
			if finished[j] {
				continue
			}
			d, ok := last[j.key()]
			if !ok {
				d = unknownDuration
			}
			if start, ok := running[j]; ok {
				d = max(0, d-now.Sub(start).Seconds())
			}
			sum += d
			longest = max(longest, d)
		}
		return sum
	}
	nodeLeft := left(node)
	secs := max(nodeLeft/float64(max(1, lanes)), longest, left(pool)/float64(max(1, workers)))
	return (time.Duration(secs) * time.Second).Round(time.Second)
}

// longestFirst orders js by the last run's durations, the longest first
// and the ones no run has timed before them all (they may be long).
func longestFirst(js []*job, last map[string]float64) {
	sort.SliceStable(js, func(a, b int) bool {
		da, oka := last[js[a].key()]
		db, okb := last[js[b].key()]
		if oka != okb {
			return !oka
		}
		return da > db
	})
}

// measured are the durations of a run on a 2-core machine, for a cache
// without any yet (a clean machine's first run): the longest jobs start
// first then too.
//
//go:embed durations.json
var measured []byte

// readDurations are the last run's durations, over the measured ones.
func readDurations(file string) map[string]float64 {
	m := map[string]float64{}
	_ = json.Unmarshal(measured, &m)
	if b, err := os.ReadFile(file); err == nil { //nolint:gosec // the durations file of the component cache
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// writeDurations keeps each job's last duration (of a run that ended; a
// cancelled run keeps the old ones).
func writeDurations(file string, last map[string]float64, jobs []*job) {
	if file == "" {
		return
	}
	for _, j := range jobs {
		if !j.end.IsZero() {
			last[j.key()] = j.end.Sub(j.start).Seconds()
		}
	}
	b, err := json.MarshalIndent(last, "", "  ")
	if err != nil {
		return
	}
	_ = os.MkdirAll(filepath.Dir(file), 0o750)
	_ = os.WriteFile(file, append(b, '\n'), 0o644) //nolint:gosec // timings, not secrets
}
