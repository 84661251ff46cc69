package nspawn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSuite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "os-release")
	os.WriteFile(p, []byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n"), 0o644)
	if s, err := Suite(p); err != nil || s != "bookworm" {
		t.Fatalf("Suite = %q, %v", s, err)
	}
	os.WriteFile(p, []byte("ID=debian\nVERSION_CODENAME=\n"), 0o644)
	if _, err := Suite(p); err == nil || !strings.Contains(err.Error(), "names no VERSION_CODENAME") {
		t.Fatalf("an empty codename: %v", err)
	}
}

// TestMirror reads apt's sources as apt does: sources.list first, then
// sources.list.d in name order, one-line and deb822, skipping disabled
// stanzas, deb-src, other suites and files apt ignores.
func TestMirror(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
		err   string
	}{
		{name: "one-line with options", files: map[string]string{
			"sources.list": "# a comment\ndeb-src http://src.example/debian bookworm main\n" +
				"deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian/ bookworm main\n",
		}, want: "http://one.example/debian"},
		{name: "deb822 after an empty sources.list", files: map[string]string{
			"sources.list": "",
			"sources.list.d/debian.sources": "Types: deb\nURIs: http://upd.example/debian\nSuites: bookworm-updates\n\n" +
				"Types: deb deb-src\n# comment\nURIs: http://deb.example/debian\n http://second.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n",
		}, want: "http://deb.example/debian"},
		{name: "disabled stanza and ignored names", files: map[string]string{
			"sources.list.d/a.sources":                  "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n",
			"sources.list.d/b.list.disabled-by-farm":    "deb http://ignored.example/debian bookworm main\n",
			"sources.list.d/c.sources.disabled-by-farm": "Types: deb\nURIs: http://ignored.example/debian\nSuites: bookworm\n",
			"sources.list.d/d.list":                     "deb http://d.example/debian bookworm main\n",
		}, want: "http://d.example/debian"},
		{name: "no source for the suite", files: map[string]string{
			"sources.list": "deb http://x.example/debian trixie main\n",
		}, err: "no deb source for suite bookworm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.Mkdir(filepath.Join(dir, "sources.list.d"), 0o755)
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Mirror(dir, "bookworm")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Mirror = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Mirror = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRootfsName changes with the package list: a root made for another
// list is not taken from the cache.
func TestRootfsName(t *testing.T) {
	a := rootfsName("bookworm")
	if !strings.HasPrefix(a, "rootfs-bookworm-") || len(a) != len("rootfs-bookworm-")+12 {
		t.Fatalf("rootfsName = %q", a)
	}
	saved := Packages
	t.Cleanup(func() { Packages = saved })
	Packages = append(append([]string(nil), saved...), "curl")
	if b := rootfsName("bookworm"); b == a {
		t.Fatalf("the name did not change with the package list: %q", b)
	}
}
