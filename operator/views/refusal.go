package views

import (
	"errors"
	"fmt"
)

// ErrRefused marks input the store refused: a bad name, an unknown
// controller, a fork of a route, a bound passed. The command exits 2.
var ErrRefused = errors.New("refused")

// Refusedf formats a one-line refusal wrapping ErrRefused: what the store,
// the admin language, the host and the command line each refuse of their
// input.
func Refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}
