package deps

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayoutNamesOperatorPackages: every package under operator/ is named
// in DESIGN.md section 11's layout (a line of its code block beginning
// with the package's directory and a slash), and every operator package
// the layout names exists: the operator's side grows a package only
// where the design says it does.
func TestLayoutNamesOperatorPackages(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	named, err := layoutOperatorPackages(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, p := range loadGraph(t).packages("operator/...") {
		have = append(have, strings.TrimPrefix(p, module+"/"))
	}
	for _, p := range have {
		if !slices.Contains(named, p) {
			t.Errorf("package %s is not in DESIGN.md section 11's layout", p)
		}
	}
	for _, p := range named {
		if !slices.Contains(have, p) {
			t.Errorf("DESIGN.md section 11's layout names %s, which is no package", p)
		}
	}
}

// layoutOperatorPackages reads the operator packages the layout block of
// section 11 names: the lines of its first code block that begin with
// operator/ and a path.
func layoutOperatorPackages(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(b)
	if i := strings.Index(s, "## 11. Layout"); i >= 0 {
		s = s[i:]
	}
	if i := strings.Index(s, "```\n"); i >= 0 {
		s = s[i+4:]
	}
	if i := strings.Index(s, "```"); i >= 0 {
		s = s[:i]
	}
	var out []string
	re := regexp.MustCompile(`^(operator(?:/[a-z0-9]+)*)/\s`)
	for _, line := range strings.Split(s, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out, nil
}

// TestLayoutParser: the layout's operator lines are read from section
// 11's first code block alone, a line of prose or another section's block
// naming no package.
func TestLayoutParser(t *testing.T) {
	doc := "## 10. x\n```\noperator/gone/  not this section's\n```\n## 11. Layout\n\n```\n" +
		"operator/          the core\noperator/host/     the daemon\ncontroller/  other\n```\n" +
		"operator/prose/ is not in the block\n```\noperator/later/  a later block\n```\n"
	path := filepath.Join(t.TempDir(), "DESIGN.md")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := layoutOperatorPackages(path)
	if err != nil || !slices.Equal(got, []string{"operator", "operator/host"}) {
		t.Fatalf("got %q, %v", got, err)
	}
}
