package testenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A separator is a line that is exactly "---": one inside a block scalar,
// or a string holding "\n---", does not split a document; empty documents
// are left out (a leading separator stays with its document, which
// decodes the same).
func TestSplitYAML(t *testing.T) {
	in := "---\na: 1\n---\n\n---\nb: |\n  text\n  ---\n  more\nc: \"x\\n---y\"\n---\n# only a comment\n"
	docs, err := SplitYAML([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, string(d))
	}
	want := []string{"---\na: 1\n", "b: |\n  text\n  ---\n  more\nc: \"x\\n---y\"\n", "# only a comment\n"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("documents (-want +got):\n%s", d)
	}
}
