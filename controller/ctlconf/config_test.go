package ctlconf

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseBound: a config of MaxConfigBytes is read; one byte more is
// refused before it is decoded, naming the bound.
func TestParseBound(t *testing.T) {
	at := []byte(`{"name":""}` + strings.Repeat(" ", MaxConfigBytes-len(`{"name":""}`)))
	if _, err := Parse(at); err == nil || strings.Contains(err.Error(), "bound") {
		t.Fatalf("at the bound: %v, want the name refused, not the size", err)
	}
	_, err := Parse(append(at, ' '))
	if !errors.Is(err, ErrConfig) || err.Error() != "controller config refused: 65537 bytes exceeds the bound of 65536" {
		t.Fatalf("one past the bound: %v", err)
	}
}

// TestErrorsWrapBoth: a refusal wraps ErrConfig and keeps its cause.
func TestErrorsWrapBoth(t *testing.T) {
	c := &Config{Name: "main", Bundle: filepath.Join(t.TempDir(), "none.bundle")}
	_, err := LoadBundle(c)
	if !errors.Is(err, ErrConfig) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing bundle: %v, want ErrConfig and fs.ErrNotExist", err)
	}
	_, _, err = Load(filepath.Join(t.TempDir(), "none.json"))
	if !errors.Is(err, ErrConfig) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing config: %v, want ErrConfig and fs.ErrNotExist", err)
	}
	if _, err := Parse([]byte(`{"name": 1}`)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "cannot unmarshal number") {
		t.Fatalf("a wrong type: %v", err)
	}
}
