package operator

import (
	"strconv"
)

// maxAppAccount bounds a route's application account name: the longest
// account name useradd accepts.
const maxAppAccount = 32

// validAppAccount checks a route's AppAccount: empty (a route that names
// no account, dialled unchecked), or 1 to 32 of A-Za-z0-9._-, first a letter
// or '_', as useradd accepts; never all digits, so a name is never read as
// a uid. Whether the account exists is the host's question when it dials:
// a route may be registered before its application's account is made.
func validAppAccount(route, name string) error {
	if name == "" {
		return nil
	}
	if len(name) > maxAppAccount {
		return Refusedf("route %s: application account %s: must be 1 to %d bytes", route, strconv.Quote(trunc(name, 40)), maxAppAccount)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '.' || c == '-')) {
			return Refusedf("route %s: application account %s: only A-Za-z0-9._- allowed, first a letter or '_'", route, strconv.Quote(name))
		}
	}
	return nil
}
