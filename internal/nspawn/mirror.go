package nspawn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Suite returns VERSION_CODENAME of the os-release file at path (the
// running system's: /etc/os-release).
func Suite(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "VERSION_CODENAME=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		if v == "" {
			break
		}
		return v, nil
	}
	return "", fmt.Errorf("%s names no VERSION_CODENAME", path)
}

// Mirror returns the URI of the first enabled deb source for suite that apt
// is configured with under etcApt (/etc/apt): sources.list, then
// sources.list.d/*.list and *.sources in name order, one-line and deb822
// formats both. Only the suite itself counts (bookworm, not
// bookworm-updates): it is what debootstrap fetches.
func Mirror(etcApt, suite string) (string, error) {
	files := []string{filepath.Join(etcApt, "sources.list")}
	more, err := filepath.Glob(filepath.Join(etcApt, "sources.list.d", "*"))
	if err != nil {
		return "", err
	}
	sort.Strings(more)
	files = append(files, more...)
	for _, f := range files {
		var uri string
		switch {
		case strings.HasSuffix(f, ".list"):
			uri, err = oneLineMirror(f, suite)
		case strings.HasSuffix(f, ".sources"):
			uri, err = deb822Mirror(f, suite)
		default:
			continue // apt ignores other names (.disabled, .save, ...)
		}
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if uri != "" {
			return uri, nil
		}
	}
	return "", fmt.Errorf("no deb source for suite %s in %s", suite, etcApt)
}

// oneLineMirror reads `deb [options] URI SUITE COMPONENT...` lines.
func oneLineMirror(path, suite string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			// Options: up to and including the field that ends with "]".
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 && f[1] == suite {
			return strings.TrimSuffix(f[0], "/"), nil
		}
	}
	return "", nil
}

// deb822Mirror reads the stanzas of a .sources file (sources.list(5)).
func deb822Mirror(path, suite string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	stanza := map[string]string{}
	var last string
	pick := func() string {
		defer clear(stanza)
		if strings.EqualFold(stanza["enabled"], "no") ||
			!containsField(stanza["types"], "deb") || !containsField(stanza["suites"], suite) {
			return ""
		}
		uris := strings.Fields(stanza["uris"])
		if len(uris) == 0 {
			return ""
		}
		return strings.TrimSuffix(uris[0], "/")
	}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			if uri := pick(); uri != "" {
				return uri, nil
			}
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				stanza[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			stanza[last] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return pick(), nil
}

// mirrorReachable asks the mirror for the suite's Release file, with a
// bound: debootstrap would otherwise hang or fail halfway.
func mirrorReachable(ctx context.Context, uri, suite string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	url := uri + "/dists/" + suite + "/Release"
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HEAD %s: %s", url, resp.Status)
	}
	return nil
}
