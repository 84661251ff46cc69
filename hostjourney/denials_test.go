package hostjourney_test

import (
	"slices"
	"testing"
)

// TestClassifyDenials tells steward's seccomp records (by comm, or by exe
// when the comm is another) from other processes' and from the kernel's
// notes that records were lost.
func TestClassifyDenials(t *testing.T) {
	op := `audit: type=1326 audit(1.2:3): uid=996 pid=9 comm="steward-operato" exe="/usr/local/bin/steward-operator" sig=0 syscall=435 code=0x50000`
	renamed := `audit: type=1326 audit(1.2:4): uid=995 pid=9 comm="worker" exe="/usr/local/bin/steward-controller" sig=0 syscall=1 code=0x50000`
	journald := `audit: type=1326 audit(1.2:5): uid=0 pid=7 comm="systemd-journal" exe="/usr/lib/systemd/systemd-journald" sig=0 syscall=435 code=0x50000`
	lost := `audit: printk limit exceeded`
	steward, others, gone := classifyDenials([]string{op, journald, renamed, lost, "seccomp: unrelated"})
	if !slices.Equal(steward, []string{op, renamed}) || !slices.Equal(others, []string{journald}) || !slices.Equal(gone, []string{lost}) {
		t.Fatalf("steward %q\nothers %q\nlost %q", steward, others, gone)
	}
}
