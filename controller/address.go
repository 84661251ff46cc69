package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stewardrt/steward/oracleops"
)

// Address bounds. An application name is a route's application name: the
// operator's name rules (1 to 64 of A-Za-z0-9._-, the first a letter or
// digit; operator.validName), since the host's route records are the one
// authority on which applications exist. A node is a host name, which
// Linux bounds at 64 bytes (HOST_NAME_MAX), written in the same alphabet.
const (
	// MaxApplicationLen bounds an application name, in bytes.
	MaxApplicationLen = 64
	// MaxNodeLen bounds the node of an address, in bytes.
	MaxNodeLen = 64
	// MaxAddressLen bounds APPLICATION/OPERATION, in bytes: the longest
	// application name, "/" and the longest operation id. A node prefix
	// (at most MaxNodeLen bytes and its "/") comes on top of it.
	MaxAddressLen = MaxApplicationLen + 1 + oracleops.MaxOperationIDLen
)

// Address names one operation of one application: APPLICATION/OPERATION,
// or NODE/APPLICATION/OPERATION where NODE is the host the application
// runs on. Steward reaches only its own host's applications today; the node
// prefix leaves room for more without changing the format.
type Address struct {
	Node        string // "" when the address names none
	Application string
	Operation   string
}

// String formats a as ParseAddress reads it.
func (a Address) String() string {
	if a.Node != "" {
		return a.Node + "/" + a.Application + "/" + a.Operation
	}
	return formatAddress(a.Application, a.Operation)
}

// formatAddress is the address of operation op of application app on
// this host, as the tools answer it.
func formatAddress(app, op string) string { return app + "/" + op }

// ParseAddress reads an address an agent wrote. It checks the shape and
// every part's rules, not whether the node is this host (see
// Controller.checkNode) or the application or operation exist. Its errors
// are one line, starting "address: ".
func ParseAddress(s string) (Address, error) {
	parts := strings.SplitN(s, "/", 4)
	var a Address
	switch len(parts) {
	case 2:
		a = Address{Application: parts[0], Operation: parts[1]}
	case 3:
		a = Address{Node: parts[0], Application: parts[1], Operation: parts[2]}
	default:
		return Address{}, fmt.Errorf("address: %s is not APPLICATION/OPERATION or NODE/APPLICATION/OPERATION", quoteTrunc(s))
	}
	if n := len(a.Application) + 1 + len(a.Operation); n > MaxAddressLen {
		return Address{}, fmt.Errorf("address: APPLICATION/OPERATION of %d bytes exceeds the bound of %d", n, MaxAddressLen)
	}
	if len(parts) == 3 {
		if err := checkName("node", a.Node, MaxNodeLen); err != nil {
			return Address{}, err
		}
	}
	if err := checkName("application", a.Application, MaxApplicationLen); err != nil {
		return Address{}, err
	}
	if err := oracleops.ValidateOperationID(a.Operation); err != nil {
		return Address{}, fmt.Errorf("address: %w", err)
	}
	return a, nil
}

// checkName checks a node or application name of an address: 1 to max of
// A-Za-z0-9._-, the first a letter or digit.
func checkName(what, s string, max int) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("address: %s name %s must be 1 to %d bytes", what, quoteTrunc(s), max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("address: %s name %s: only A-Za-z0-9._- allowed, the first a letter or digit", what, quoteTrunc(s))
		}
	}
	return nil
}

// quoteTrunc quotes at most 80 bytes of s, so that a refusal stays one
// short line whatever an agent sent.
func quoteTrunc(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "..."
	}
	return strconv.Quote(s)
}

// checkNode accepts the node of an address when it is this host: the
// controller's host name, read once at start. Host names are compared
// without regard to case, as DNS compares them.
func (c *Controller) checkNode(a Address) error {
	if a.Node == "" || (c.hostname != "" && strings.EqualFold(a.Node, c.hostname)) {
		return nil
	}
	host := c.hostname
	if host == "" {
		host = "its name could not be read at start"
	}
	return fmt.Errorf("node %s is not this host (%s): steward reaches only its own host's applications today", a.Node, host)
}

// target is the application and operation a tool call names: by address,
// by application and operationId, or by both when they agree (op nil:
// the agent wrote no operationId). The application is
// "" only when the agent named neither (the caller decides what that
// means); the errors are argument refusals.
func (c *Controller) target(address, app string, op *string) (string, *string, error) {
	if address == "" {
		return app, op, nil
	}
	a, err := ParseAddress(address)
	if err != nil {
		return "", nil, argErr("%v", err)
	}
	if err := c.checkNode(a); err != nil {
		return "", nil, argErr("%v", err)
	}
	if app != "" && app != a.Application {
		return "", nil, argErr("address %s names application %s but application is %s: give one, or both alike", address, a.Application, quoteTrunc(app))
	}
	if op != nil && *op != a.Operation {
		return "", nil, argErr("address %s names operation %s but operationId is %s: give one, or both alike", address, a.Operation, quoteTrunc(*op))
	}
	return a.Application, &a.Operation, nil
}
