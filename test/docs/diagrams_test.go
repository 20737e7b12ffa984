package docs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// diagram is one ```mermaid block of a doc.
type diagram struct {
	doc  string
	line int
	body string
}

// diagrams returns every ```mermaid block of the hand-written docs.
func diagrams(t *testing.T) []diagram {
	t.Helper()
	var out []diagram
	for _, f := range docFiles(t) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		var cur *diagram
		n := 0
		for sc.Scan() {
			n++
			line := sc.Text()
			switch {
			case cur == nil && strings.TrimSpace(line) == "```mermaid":
				cur = &diagram{doc: filepath.Base(f), line: n}
			case cur != nil && strings.TrimSpace(line) == "```":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.body += line + "\n"
			}
		}
		_ = fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// parseDiagrams runs mermaid's own parser (hack/install-mermaid.sh) over
// the diagrams and returns its line for each, by file.
func parseDiagrams(t *testing.T, ds []diagram) map[string]string {
	t.Helper()
	script := filepath.Join(testenv.CacheDir(), "mermaid", "parse.mjs")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("mermaid's parser is not installed (%v): run hack/install-mermaid.sh (make tools does)", err)
	}
	dir := t.TempDir()
	args := []string{script}
	for i, d := range ds {
		p := filepath.Join(dir, fmt.Sprintf("%d.mmd", i))
		if err := os.WriteFile(p, []byte(d.body), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "node", args...).CombinedOutput()
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			got[f[1]] = l
		}
	}
	res := map[string]string{}
	for i := range ds {
		p := filepath.Join(dir, fmt.Sprintf("%d.mmd", i))
		res[fmt.Sprint(i)] = got[p]
		if got[p] == "" {
			t.Fatalf("the parser said nothing of %s:%d:\n%s", ds[i].doc, ds[i].line, out)
		}
	}
	return res
}

// TestDiagramsParse: every Mermaid diagram of the docs parses with the
// parser a docs site renders it with, and the docs have the two pictures
// people look for first (how the parts connect; a Database's lifecycle). A
// broken diagram given to the same run is reported, so a parser that
// accepts anything fails the test.
func TestDiagramsParse(t *testing.T) {
	testenv.Need(t)
	ds := diagrams(t)
	kinds := map[string]bool{}
	for _, d := range ds {
		kinds[strings.Fields(d.body)[0]] = true
	}
	if !kinds["flowchart"] || !kinds["stateDiagram-v2"] {
		t.Errorf("the docs' diagrams are of kinds %v: want an architecture flowchart and a lifecycle stateDiagram-v2", kinds)
	}
	broken := diagram{doc: "(planted)", body: "flowchart LR\n  A[Tenant --> B(\n"}
	res := parseDiagrams(t, append(ds, broken))
	for i, d := range ds {
		if r := res[fmt.Sprint(i)]; !strings.HasPrefix(r, "ok ") {
			t.Errorf("%s:%d: the diagram does not parse: %s", d.doc, d.line, r)
		}
	}
	if r := res[fmt.Sprint(len(ds))]; !strings.HasPrefix(r, "error ") {
		t.Errorf("a broken diagram was not reported: %s", r)
	}
}
