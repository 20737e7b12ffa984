package docs

import (
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// reasonTrees are the source trees whose condition reasons a
// ClusterProviderConfig, a Database or a DatabaseBinding (and through it a
// Tenant) can show: every exported constant named Reason..., and the
// failure classes of internal/clients/postgres (type Class), which are
// Ready reasons of their own.
var reasonTrees = []string{"internal", "apis"}

// reasonsWithoutRow are the reasons troubleshooting.md has no row for,
// each with why: only the all-clear value of a condition that never
// changes Ready. Anything a reader may be stuck on or must act on has a
// row.
var reasonsWithoutRow = map[string]string{
	"OwnerOnly":    "OtherAccess=False: no role but the owner's reaches the database; nothing to do",
	"WithinBudget": "ConnectionBudget=True: the tenant roles' connection limits fit the server; nothing to do",
	"OptionsMatch": "OptionsDiffer=False: the database has the encoding and locale it asks; nothing to do",
}

// definedReasons collects the reasons reasonTrees define, from their
// source (test files aside), by value, naming where each is defined.
func definedReasons(t *testing.T) map[string]string {
	t.Helper()
	root := testenv.RepoRoot()
	var dirs []string
	for _, tree := range reasonTrees {
		dirs = append(dirs, filepath.Join(root, tree))
	}
	consts, err := testenv.Consts(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range consts {
		class := c.Type == "Class" && c.Package == "postgres"
		if !ast.IsExported(c.Name) || (!strings.HasPrefix(c.Name, "Reason") && !class) || !c.Literal || c.Value == "" {
			continue
		}
		file, _, _ := strings.Cut(c.Pos, ":")
		rel, _ := filepath.Rel(root, file)
		if prev, seen := out[c.Value]; !seen || (strings.HasPrefix(c.Name, "Reason") && !strings.HasPrefix(prev, "Reason")) {
			out[c.Value] = c.Name + " (" + rel + ")"
		}
	}
	return out
}

// tableRowFirstCells returns the first cell of every table row of a
// Markdown document outside its code blocks, header rows included
// (they name no reason).
func tableRowFirstCells(doc string) []string {
	var cells []string
	sep := regexp.MustCompile(`^\|[\s:|-]*$`)
	for _, l := range strings.Split(stripCode(doc), "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") || sep.MatchString(l) {
			continue
		}
		rest := l[1:]
		end := -1
		for i := 0; i < len(rest); i++ {
			if rest[i] == '\\' {
				i++
				continue
			}
			if rest[i] == '|' {
				end = i
				break
			}
		}
		if end < 0 {
			continue
		}
		cells = append(cells, rest[:end])
	}
	return cells
}

// docs/README.md promises that troubleshooting.md explains every reason a
// server, a Database or a binding (and its Tenant) can show: each reason
// the code defines is named, in backticks, in the first cell of one of its
// table rows, so a reader who searches for the reason they see finds what
// it means and what to do.
func TestEveryReasonHasATroubleshootingRow(t *testing.T) {
	code := definedReasons(t)
	if len(code) < 40 {
		t.Fatalf("found only %d reasons under %v: the scan proves nothing: %v", len(code), reasonTrees, code)
	}
	for _, known := range []string{"AlreadyBound", "NamespaceNotAllowed", "DataRoleUnavailable", "ServerReadOnly", "UnsafeTemplates"} {
		if _, ok := code[known]; !ok {
			t.Fatalf("the scan did not find the reason %q: it proves nothing", known)
		}
	}
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	inRow := map[string]bool{}
	span := regexp.MustCompile("`([^`\n]+)`")
	for _, c := range tableRowFirstCells(string(b)) {
		for _, m := range span.FindAllStringSubmatch(c, -1) {
			inRow[strings.TrimSpace(m[1])] = true
		}
	}
	var reasons []string
	for r := range code {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		why, excluded := reasonsWithoutRow[r]
		switch {
		case excluded && inRow[r]:
			t.Errorf("the reason %q has a row in docs/troubleshooting.md: take it out of reasonsWithoutRow (%s)", r, why)
		case !excluded && !inRow[r]:
			t.Errorf("docs/troubleshooting.md has no table row whose first cell names `%s` (%s): add one saying what it means and what to do", r, code[r])
		}
	}
	for r := range reasonsWithoutRow {
		if _, ok := code[r]; !ok {
			t.Errorf("reasonsWithoutRow has %q, which the code no longer defines", r)
		}
	}
}
