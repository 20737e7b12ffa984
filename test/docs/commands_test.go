package docs

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// command is one command line a doc tells a reader to run.
type command struct {
	doc, line string
	args      []string // the words after the program name
}

// docFiles are the hand-written docs: docs/*.md and README.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := testenv.RepoRoot()
	fs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(fs, filepath.Join(root, "README.md"))
}

var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "": true}

// documentedCommands returns, by program, every command of the docs' shell
// code blocks (in a block without a language, only the lines after a `$ `
// prompt), continuation lines joined, pipelines, lists and $(...) split.
func documentedCommands(t *testing.T) map[string][]command {
	t.Helper()
	out := map[string][]command{}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := filepath.Base(f)
		if doc == "README.md" {
			doc = "README.md (root)"
		}
		inBlock, lang, pending := false, "", ""
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				if !inBlock {
					inBlock = true
					lang, _, _ = strings.Cut(strings.TrimPrefix(trimmed, "```"), " ")
				} else {
					inBlock, pending = false, ""
				}
				continue
			}
			if !inBlock || !shellLangs[lang] {
				continue
			}
			if pending == "" {
				switch {
				case strings.HasPrefix(trimmed, "$ "):
					trimmed = strings.TrimPrefix(trimmed, "$ ")
				case lang == "" || lang == "console":
					continue // output, not a command
				}
			}
			if strings.HasSuffix(trimmed, `\`) {
				pending += strings.TrimSuffix(trimmed, `\`) + " "
				continue
			}
			full := pending + trimmed
			pending = ""
			for _, seg := range segments(full) {
				w := shellWords(seg)
				for len(w) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(w[0]) {
					w = w[1:] // NAME=value before the command
				}
				if len(w) == 0 {
					continue
				}
				prog := w[0]
				switch prog {
				case "crossplane", "kubectl", "bao", "make":
					out[prog] = append(out[prog], command{doc: doc, line: strings.TrimSpace(full), args: w[1:]})
				}
			}
		}
	}
	return out
}

// segments splits a shell line at |, ||, &&, ;, & and $( outside quotes,
// and drops a # comment.
func segments(s string) []string {
	var segs []string
	var cur strings.Builder
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
			cur.WriteRune(r)
		case r == '#' && (i == 0 || rs[i-1] == ' '):
			i = len(rs)
		case r == '|' || r == ';' || r == '&' || r == ')' || (r == '$' && i+1 < len(rs) && rs[i+1] == '('):
			segs = append(segs, cur.String())
			cur.Reset()
			if r == '$' {
				i++
			}
		default:
			cur.WriteRune(r)
		}
	}
	return append(segs, cur.String())
}

// shellWords splits a command into words, removing quotes.
func shellWords(s string) []string {
	var w []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				w = append(w, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		w = append(w, cur.String())
	}
	return w
}

var subcommandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// globalValueFlags are the flags, before the subcommand, that take the next
// word as their value.
var globalValueFlags = map[string]bool{"-n": true, "--namespace": true, "--context": true, "--kubeconfig": true, "--config": true}

// subcommand returns the leading words of a command's arguments: the
// subcommand path and, where a command takes them, plain-word arguments
// (`get tenant`); flags before the first word are skipped.
func subcommand(args []string) []string {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if globalValueFlags[args[i]] {
			i++
		}
		i++
	}
	var words []string
	for ; i < len(args) && subcommandWord.MatchString(args[i]); i++ {
		words = append(words, args[i])
	}
	return words
}

// usagePath is the command path the help output's usage line names.
func usagePath(prog, help string) []string {
	_, after, ok := strings.Cut(help, "Usage:")
	if !ok {
		return nil
	}
	f := strings.Fields(after)
	if len(f) == 0 || f[0] != prog {
		return nil
	}
	var p []string
	for _, w := range f[1:] {
		if !subcommandWord.MatchString(w) {
			break
		}
		p = append(p, w)
	}
	return p
}

// hasSubcommands says whether a help output lists subcommands, in the
// format of each CLI (kong, cobra, mitchellh/cli).
func hasSubcommands(help string) bool {
	return strings.Contains(help, "\nCommands:") || strings.Contains(help, "Available Commands:") ||
		strings.Contains(help, "Subcommands:") || strings.Contains(help, "<subcommand>")
}

// checkCLI runs `<bin> <subcommand words> --help` for every documented
// command of prog and fails when the pinned CLI has no such subcommand.
func checkCLI(t *testing.T, prog string) {
	if testing.Short() {
		t.Skip("runs the pinned CLIs (-short: skipped)")
	}
	bin := filepath.Join(testenv.BinDir(), prog)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found at %s: install it with `make tools-all` (or set PPT_BIN)", prog, bin)
	}
	cmds := documentedCommands(t)[prog]
	if len(cmds) == 0 {
		t.Fatalf("the docs name no %s command: the scan proves nothing", prog)
	}
	home := t.TempDir()
	checked := map[string]bool{}
	for _, c := range cmds {
		words := subcommand(c.args)
		key := strings.Join(words, " ")
		if checked[key] {
			continue
		}
		checked[key] = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, append(append([]string{}, words...), "--help")...)
		// No kubeconfig, CLI configuration or OpenBao address of the machine.
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + filepath.Join(home, "none")}
		b, err := cmd.CombinedOutput()
		cancel()
		help := string(b)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s %s --help: %v", prog, key, err)
		}
		if err != nil {
			t.Errorf("%s: `%s` is not a command of the pinned %s (`%s %s --help` exits %d)", c.doc, c.line, prog, prog, key, exit.ExitCode())
			continue
		}
		path := usagePath(prog, help)
		if len(path) > len(words) || strings.Join(words[:len(path)], " ") != strings.Join(path, " ") {
			t.Errorf("%s: `%s`: %s's help names the command %q, not a prefix of %q", c.doc, c.line, prog, strings.Join(path, " "), key)
			continue
		}
		if len(words) > len(path) && hasSubcommands(help) {
			t.Errorf("%s: `%s`: the pinned %s has no subcommand %q of %q", c.doc, c.line, prog, words[len(path)], strings.Join(append([]string{prog}, path...), " "))
		}
	}
	t.Logf("%d distinct %s commands checked against %s", len(checked), prog, bin)
}

func TestDocumentedCrossplaneCommandsExist(t *testing.T) { checkCLI(t, "crossplane") }
func TestDocumentedKubectlCommandsExist(t *testing.T)    { checkCLI(t, "kubectl") }
func TestDocumentedBaoCommandsExist(t *testing.T)        { checkCLI(t, "bao") }

// Every `make <target>` the docs show, in a code block or inline, is a
// target of the Makefile.
func TestDocumentedMakeTargetsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):([^=]|$)`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	if !targets["test"] || !targets["dev"] {
		t.Fatalf("found no test or dev target in the Makefile (%v): the parse proves nothing", targets)
	}
	cmds := documentedCommands(t)["make"]
	// Inline code spans too: `make test-matrix PG_MAJORS=16`.
	inline := regexp.MustCompile("`make ([^`]*)`")
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range inline.FindAllStringSubmatch(string(b), -1) {
			cmds = append(cmds, command{doc: filepath.Base(f), line: "make " + m[1], args: shellWords(m[1])})
		}
	}
	if len(cmds) == 0 {
		t.Fatal("the docs name no make command: the scan proves nothing")
	}
	bad := map[string]bool{}
	for _, c := range cmds {
		for _, a := range c.args {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
				continue
			}
			if !targets[a] && !bad[c.doc+a] {
				bad[c.doc+a] = true
				t.Errorf("%s: `%s`: the Makefile has no target %q", c.doc, c.line, a)
			}
		}
	}
}

// Every relative link of the docs and the README points at a file of the
// repository, and a #fragment at a heading of that Markdown file.
func TestDocLinksResolve(t *testing.T) {
	root := testenv.RepoRoot()
	files := docFiles(t)
	ref, err := filepath.Glob(filepath.Join(root, "docs", "reference", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, ref...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(stripCode(string(b)), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			p, frag, _ := strings.Cut(target, "#")
			dest := f
			if p != "" {
				dest = filepath.Join(filepath.Dir(f), p)
			}
			rel, _ := filepath.Rel(root, f)
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %s: no such file", rel, target)
				continue
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest)[frag] {
				t.Errorf("%s: link %s: no heading with that anchor", rel, target)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no relative link: the scan proves nothing")
	}
}

// codeSpan is an inline code span, where ](x) is not a link either.
var codeSpan = regexp.MustCompile("`[^`\n]*`")

// stripCode removes fenced code blocks, where ](x) is not a link.
func stripCode(s string) string {
	var out strings.Builder
	in := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, f string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]bool{}
	count := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, l := range strings.Split(stripCode(string(b)), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		s := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if c := count[s]; c > 0 {
			a[s+"-"+strconv.Itoa(c)] = true
		} else {
			a[s] = true
		}
		count[s]++
	}
	return a
}

// The scan finds the commands it checks: a known command of each program.
func TestCommandScanFindsKnownCommands(t *testing.T) {
	cmds := documentedCommands(t)
	want := map[string]string{"crossplane": "xpkg install", "kubectl": "get pgserver", "bao": "policy write", "make": "dev"}
	var progs []string
	for p := range want {
		progs = append(progs, p)
	}
	sort.Strings(progs)
	for _, p := range progs {
		found := false
		for _, c := range cmds[p] {
			if strings.HasPrefix(strings.Join(subcommand(c.args), " "), want[p]) {
				found = true
			}
		}
		if !found {
			t.Errorf("no documented `%s %s` found among %d %s commands", p, want[p], len(cmds[p]), p)
		}
	}
}

// Every documented install of the provider names the Provider as the tests
// install it: the name the package manager gives the Configuration's
// provider dependency, so that an upgrade never makes it install a second
// Provider of the same package. Every documented kubectl command on a
// Provider names it the same way.
func TestDocumentedProviderName(t *testing.T) {
	cmds := documentedCommands(t)
	installs := 0
	for _, c := range cmds["crossplane"] {
		sub := subcommand(c.args)
		if strings.Join(sub, " ") != "xpkg install provider" {
			continue
		}
		installs++
		var pos []string
		for _, a := range c.args {
			if !strings.HasPrefix(a, "-") {
				pos = append(pos, a)
			}
		}
		// xpkg install provider <package> <name>
		if len(pos) < 5 || pos[4] != testenv.ProviderName {
			t.Errorf("%s: `%s` does not name the Provider %s", c.doc, c.line, testenv.ProviderName)
		}
		if len(pos) < 4 || !strings.HasPrefix(pos[3], testenv.ProviderPackageName+":") {
			t.Errorf("%s: `%s` does not install %s", c.doc, c.line, testenv.ProviderPackageName)
		}
	}
	if installs == 0 {
		t.Fatal("no documented `crossplane xpkg install provider`")
	}
	providerObject := regexp.MustCompile(`^providers?(\.pkg\.crossplane\.io)?(/|$)`)
	named := 0
	for _, c := range cmds["kubectl"] {
		for i, a := range c.args {
			if !providerObject.MatchString(a) || i+1 >= len(c.args) {
				continue
			}
			name := c.args[i+1]
			if strings.HasPrefix(name, "-") || strings.HasPrefix(name, "<") {
				continue
			}
			named++
			if name != testenv.ProviderName {
				t.Errorf("%s: `%s` names the Provider %q, want %s", c.doc, c.line, name, testenv.ProviderName)
			}
		}
	}
	if named == 0 {
		t.Fatal("no documented kubectl command names the Provider")
	}
	checkProviderNameInFiles(t)
}

// providerNameUses are the ways a file names the Provider object outside a
// doc's shell blocks: an install command (a comment of package/crossplane.yaml
// too), the label Crossplane gives the provider's Pods (pkg.crossplane.io/provider,
// as a selector, in a manifest, or as the Prometheus relabel source) and its
// revisions (pkg.crossplane.io/package), and the troubleshooting's "under the
// name". The first group is the name; a placeholder (<...>) is skipped.
var providerNameUses = []*regexp.Regexp{
	regexp.MustCompile(`xpkg install provider\s+\S+\s+(?:\\\s*#?\s*)?([^\s\\]+)`),
	regexp.MustCompile(`pkg\.crossplane\.io/provider(?:=|:[ \t]*)["'` + "`" + `]?([A-Za-z0-9<][A-Za-z0-9._<>-]*)`),
	regexp.MustCompile(`pkg\.crossplane\.io/package(?:=|:[ \t]*)["'` + "`" + `]?([A-Za-z0-9._-]*provider-postgresql-tenant[A-Za-z0-9._-]*)`),
	regexp.MustCompile(`__meta_kubernetes_pod_label_pkg_crossplane_io_provider\]\s*\n\s*regex:\s*["']?([^\s"']+)`),
	regexp.MustCompile("under the name `([^`]*provider-postgresql-tenant[^`]*)`"),
}

// checkProviderNameInFiles checks every use of the Provider's name in the
// docs, README.md, examples/, package/ (but the generated CRDs), cluster/
// and hack/: each is testenv.ProviderName.
func checkProviderNameInFiles(t *testing.T) {
	t.Helper()
	root := testenv.RepoRoot()
	var files []string
	for _, d := range []string{"docs", "examples", "package", "cluster", "hack"} {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if p == filepath.Join(root, "package", "crds") || p == filepath.Join(root, "docs", "reference") {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(p) {
			case ".md", ".yaml", ".yml", ".json", ".sh", ".go", ".lua", "":
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files = append(files, filepath.Join(root, "README.md"))
	uses := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, re := range providerNameUses {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				name := m[1]
				if strings.HasPrefix(name, "<") {
					continue
				}
				uses++
				if name != testenv.ProviderName {
					t.Errorf("%s: %q names the Provider %q, want %s", rel, strings.TrimSpace(m[0]), name, testenv.ProviderName)
				}
			}
		}
	}
	if uses == 0 {
		t.Fatal("no file names the Provider")
	}
}

// sharedPlurals are names of this project's kinds that other projects'
// kinds share: CloudNativePG's and provider-sql's databases, Capsule's
// tenants, every Crossplane provider's clusterproviderconfigs, and this
// project's own legacy Tenant claim. kubectl resolves a bare one to
// whichever group it prefers.
var sharedPlurals = map[string]bool{
	"tenant": true, "tenants": true, "database": true, "databases": true,
	"databasebinding": true, "databasebindings": true,
	"clusterproviderconfig": true, "clusterproviderconfigs": true,
	"xtenant": true, "xtenants": true,
}

var kubectlResource = regexp.MustCompile(`kubectl(?:\s+-n\s+\S+)?\s+(?:get|describe|edit|patch|delete|annotate|label|wait)\s+(?:--for=\S+\s+)?(?:-n\s+\S+\s+)?(?:-A\s+)?([a-z][a-z.,]*)`)

// Every kubectl command of the docs (in a block or inline) names this
// provider's kinds by short name (pgserver) or with their group, never by
// a plural another project's kind shares.
func TestDocumentedKubectlNamesNoSharedPlural(t *testing.T) {
	seen := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range kubectlResource.FindAllStringSubmatch(line, -1) {
				seen++
				for _, r := range strings.Split(m[1], ",") {
					if sharedPlurals[r] {
						t.Errorf("%s:%d: `%s` names %q, which kubectl may resolve to another project's kind: use its short name or %s.<group>", filepath.Base(f), i+1, strings.TrimSpace(m[0]), r, r)
					}
				}
			}
		}
	}
	if seen < 40 {
		t.Fatalf("found %d kubectl commands naming a resource in the docs; the scan is broken", seen)
	}
}
