package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DocBlock returns the body of the fenced block of docs/<doc> whose info
// string is "<lang> <name>": what a test checks or runs as the doc writes
// it.
func DocBlock(doc, lang, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "docs", doc)) //nolint:gosec // a doc of this repository
	if err != nil {
		return "", err
	}
	open := "```" + lang + " " + name + "\n"
	_, rest, ok := strings.Cut(string(b), open)
	if !ok {
		return "", fmt.Errorf("docs/%s has no block %q", doc, strings.TrimSpace(open))
	}
	body, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", fmt.Errorf("docs/%s: block %s is not closed", doc, name)
	}
	return body, nil
}
