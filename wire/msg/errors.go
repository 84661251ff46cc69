package msg

import "errors"

// ErrMismatch reports a signed object that verifies but says something other
// than what it must.
var ErrMismatch = errors.New("signed object does not match")
