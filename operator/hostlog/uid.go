package hostlog

import (
	"fmt"
	"strconv"
	"strings"
)

// ValidUID checks an account as the host names it, "uid:N" with N a
// decimal uid of 32 bits in its shortest form, so that two spellings of
// one account never compare unequal; what names the field (e.g. "the
// agent's account").
func ValidUID(what, s string) error {
	if n, ok := strings.CutPrefix(s, "uid:"); ok {
		if v, err := strconv.ParseUint(n, 10, 32); err == nil && strconv.FormatUint(v, 10) == n {
			return nil
		}
	}
	return fmt.Errorf("%s %s is not uid:N", what, strconv.Quote(Trunc(s, 40)))
}
