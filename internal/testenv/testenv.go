// Package testenv decides what a test does when the machine lacks what it
// needs (root, a tool, a kernel feature): it skips, saying why, except when
// the environment has CI=true. CI runs as root on a machine .ci/run has
// provisioned, so there a missing requirement is a broken CI, and a skip
// would hide exactly the tests that need root.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// CI reports whether the environment has CI=true.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips t with the reason, or fails it with the reason when CI is
// true.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("CI=true, so this is a failure, not a skip: %s", why)
	}
	t.Skip(why)
}

// NeedRoot calls Missing unless the test runs as root; why says what root
// is needed for.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root %s (CI runs as root)", why)
	}
}
