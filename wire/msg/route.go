package msg

import (
	"crypto/sha256"

	"github.com/stewardrt/steward/wire"
)

// Bounds on route records; package operator enforces them.
const (
	MaxRouteRevisions = 64 // revisions of one route
	MaxSelectedRoutes = 8  // routes selected at once
)

// Protocol names the application protocol a route speaks.
const ProtocolOracleOperationsV1 = "oracle-operations-v1"

// RouteRecord is one immutable, operator-signed revision of a route: how the
// host reaches an application and where it meets the controller. A new
// revision names in Replaces the RouteID of the revision it replaces, which
// must be the one currently selected.
type RouteRecord struct {
	Route       string   `cbor:"route"`
	Revision    uint64   `cbor:"revision"`
	Replaces    []byte   `cbor:"replaces"` // RouteID of the replaced revision; nil for the first
	Application string   `cbor:"application"`
	Protocol    string   `cbor:"protocol"`
	Controller  string   `cbor:"controller"`
	Upstream    string   `cbor:"upstream"` // the application's Unix socket
	Forward     string   `cbor:"forward"`  // the host's listener for this route
	Reverse     string   `cbor:"reverse"`  // the controller's reverse socket
	Prefix      string   `cbor:"prefix"`   // the signed API prefix, e.g. /v1
	Timeouts    Timeouts `cbor:"timeouts"`
	IssuedAt    int64    `cbor:"issuedAt"`
	// AppAccount is the account the application runs as: the host checks
	// the upstream socket's owner and its peer's SO_PEERCRED uid against it
	// on every dial. Omitted in revisions before it, which the host dials
	// unchecked, with a warning.
	AppAccount string `cbor:"appAccount,omitempty"`
}

// Timeouts bound each phase of delivering to an application, in ms.
type Timeouts struct {
	ConnectMs  int64 `cbor:"connectMs"`
	ResponseMs int64 `cbor:"responseMs"`
}

// RouteID names a signed route record: SHA-256 of its signed bytes.
func RouteID(signed []byte) []byte {
	h := sha256.Sum256(signed)
	return h[:]
}

// SignRoute signs r with the operator's hybrid key.
func SignRoute(k *wire.HybridSigningKey, r RouteRecord) ([]byte, error) { return signHybrid(k, r) }

// VerifyRoute checks both signatures of a route record.
func VerifyRoute(signed []byte, pub *wire.HybridPublicKey) (RouteRecord, error) {
	var r RouteRecord
	err := verifyHybrid(signed, pub, &r, "route record")
	return r, err
}
