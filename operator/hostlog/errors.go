package hostlog

import (
	"errors"
	"fmt"
)

// ErrReceiptFault marks a host journal or a receipts file whose receipts
// do not hang together: a gap in the chain, a receipt that fails its
// signature or its terms, a balance the history does not give. Replay
// (package operator) refuses to open a journal with a gap in its chain,
// and the audit (package operator/audit) reports every fault it finds;
// both wrap this, so errors.Is tells a fault from a failure to read.
var ErrReceiptFault = errors.New("receipt fault")

// Faultf is a receipt fault, described.
func Faultf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrReceiptFault, fmt.Sprintf(format, args...))
}
