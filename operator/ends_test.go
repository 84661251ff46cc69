package operator

import (
	"fmt"
	"testing"

	"github.com/stewardrt/steward/journal"
	"github.com/stewardrt/steward/operator/hostlog"
)

// TestRefusedRecordFailureSaysWhatIsKnown: a refusal after admission
// whose record the journal removed says nothing of it is recorded; one
// whose fdatasync failed says it is known only after the restart. Either
// way nothing was reserved, and the refusal says nothing was charged.
func TestRefusedRecordFailureSaysWhatIsKnown(t *testing.T) {
	if got, want := refusalUnrecorded(fmt.Errorf("append: %w", journal.ErrNotWritten)),
		"; the host could not record this refusal's receipt, so nothing of the attempt is recorded"; got != want {
		t.Fatalf("removed: %q, want %q", got, want)
	}
	if got, want := refusalUnrecorded(fmt.Errorf("append: %w", journal.ErrFailed)),
		"; the host journal failed while recording this refusal's receipt: whether it is recorded is known only once the host has restarted"; got != want {
		t.Fatalf("failed: %q, want %q", got, want)
	}
}

// TestQuoteLine: the payer's words in a receipt's reason are one line, cut
// at a character boundary, at most the bound and "...".
func TestQuoteLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\r\nc", 10, "a b c"},
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abcdef..."},
		{"abcdé", 5, "abcd..."},
		{"bad \xff byte", 20, "bad \uFFFD byte"},
	} {
		if got := hostlog.QuoteLine(tc.in, tc.n); got != tc.want {
			t.Errorf("hostlog.QuoteLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
