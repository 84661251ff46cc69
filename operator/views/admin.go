package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/stewardrt/steward/operator/hostlog"
	"github.com/stewardrt/steward/wire/msg"
)

// ControllerView is a pinned controller, as `controller list` shows it.
type ControllerView struct {
	Name        string `json:"name"`
	UID         uint32 `json:"uid"`
	ToolKID     string `json:"toolKid"`
	DispatchKID string `json:"dispatchKid"`
	// Control is the controller's control socket; empty for a controller
	// added before it was recorded (`controller control` sets it).
	Control string `json:"control"`
}

// PurseView is a purse, as `purse show` prints it.
type PurseView struct {
	Controller string `json:"controller"`
	Funded     uint64 `json:"funded"`
	Charged    uint64 `json:"charged"` // reservations not released, settled or uncertain
	Balance    uint64 `json:"balance"`
	Holds      uint64 `json:"holds"` // admitted, waiting for the payer's consent
	Frozen     bool   `json:"frozen"`
}

// GrantSpec is what `grant issue` asks for.
type GrantSpec struct {
	Controller     string   `json:"controller"`
	Application    string   `json:"application"`
	Operations     []string `json:"operations"` // path.Match patterns; none means all
	Price          uint64   `json:"price"`
	DiscoveryPrice uint64   `json:"discoveryPrice"`
	// RefusalPrice is what an application's answer other than 2xx costs
	// (at most Price; 0, the default, charges nothing for it).
	RefusalPrice uint64    `json:"refusalPrice"`
	PerDay       uint64    `json:"perDay"`
	NotBefore    time.Time `json:"notBefore"` // zero: now
	NotAfter     time.Time `json:"notAfter"`
}

// GrantView is a grant as `grant list` shows it.
type GrantView struct {
	ID             string   `json:"id"`
	Controller     string   `json:"controller"`
	Application    string   `json:"application"`
	Operations     []string `json:"operations"`
	Price          uint64   `json:"price"`
	DiscoveryPrice uint64   `json:"discoveryPrice"`
	RefusalPrice   uint64   `json:"refusalPrice"`
	PerDay         uint64   `json:"perDay"`
	UsedToday      uint64   `json:"usedToday"`
	NotBefore      string   `json:"notBefore"`
	NotAfter       string   `json:"notAfter"`
	Revoked        bool     `json:"revoked"`
}

// RouteRequest is the REQUEST.json of `route register`.
type RouteRequest struct {
	Controller string       `json:"controller"`
	Upstream   string       `json:"upstream"`
	Forward    string       `json:"forward"`
	Reverse    string       `json:"reverse"`
	Prefix     string       `json:"prefix"`
	Timeouts   msg.Timeouts `json:"timeouts"`
	Replaces   string       `json:"replaces,omitempty"` // hex RouteID of the selected revision
	// AppAccount is the account the application runs as: the host dials
	// its upstream socket only when that account owns the socket and
	// serves it (SO_PEERCRED). Absent, the socket is dialled unchecked.
	AppAccount string `json:"appAccount,omitempty"`
}

// MaxRouteRequest bounds a REQUEST.json file.
const MaxRouteRequest = 64 << 10

// ParseRouteRequest decodes a REQUEST.json strictly (unknown fields refused).
func ParseRouteRequest(b []byte) (RouteRequest, error) {
	if len(b) > MaxRouteRequest {
		return RouteRequest{}, Refusedf("route request of %d bytes exceeds the bound of %d", len(b), MaxRouteRequest)
	}
	var r RouteRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return RouteRequest{}, Refusedf("route request: %v", err)
	}
	if dec.More() {
		return RouteRequest{}, Refusedf("route request: trailing data")
	}
	return r, nil
}

// RouteView is one route's selected revision.
type RouteView struct {
	Route       string       `json:"route"`
	Revision    uint64       `json:"revision"`
	Revisions   int          `json:"revisions"`
	ID          string       `json:"id"`
	Replaces    string       `json:"replaces"`
	Application string       `json:"application"`
	Controller  string       `json:"controller"`
	Upstream    string       `json:"upstream"`
	Forward     string       `json:"forward"`
	Reverse     string       `json:"reverse"`
	Prefix      string       `json:"prefix"`
	Timeouts    msg.Timeouts `json:"timeouts"`
	IssuedAt    string       `json:"issuedAt"`
	AppAccount  string       `json:"appAccount,omitempty"` // "" when the route's socket is dialled unchecked
	// State is the route's (package operator/routetable), StateBy who set it ("uid:N")
	// and StateAt when (RFC 3339); both empty for a route registered
	// before route states, which is active.
	State   hostlog.RouteState `json:"state"`
	StateBy string             `json:"stateBy,omitempty"`
	StateAt string             `json:"stateAt,omitempty"`
}

// AgentSpec is what `agent set` asks for: the limits of one agent of one
// controller. A nil limit is not limited.
type AgentSpec struct {
	Controller             string   `cbor:"controller" json:"controller"`
	Agent                  string   `cbor:"agent" json:"agent"`
	Operations             []string `cbor:"operations" json:"operations"`
	CallsPerDay            *uint64  `cbor:"callsPerDay" json:"callsPerDay"`
	CreditsPerDay          *uint64  `cbor:"creditsPerDay" json:"creditsPerDay"`
	CreditsPerConversation *uint64  `cbor:"creditsPerConversation" json:"creditsPerConversation"`
	ConversationsPerDay    uint64   `cbor:"conversationsPerDay" json:"conversationsPerDay"`
	RatePerMinute          *uint64  `cbor:"ratePerMinute" json:"ratePerMinute"`
	Burst                  uint64   `cbor:"burst" json:"burst"`
	// Approval marks operations whose calls wait for an approval; nil:
	// none do. Omitted when nil, as the signed record omits it.
	Approval *msg.ApprovalPolicy `cbor:"approval,omitempty" json:"approval,omitempty"`
}

// AgentView is an agent's limits and what it spent today, as `agent show`
// and `agent list` print them (nil: not limited).
type AgentView struct {
	Controller             string              `json:"controller"`
	Agent                  string              `json:"agent"`
	Revision               uint64              `json:"revision"`
	Operations             []string            `json:"operations"`
	CallsPerDay            *uint64             `json:"callsPerDay"`
	CreditsPerDay          *uint64             `json:"creditsPerDay"`
	CreditsPerConversation *uint64             `json:"creditsPerConversation"`
	ConversationsPerDay    uint64              `json:"conversationsPerDay"` // the bound in force (the default when the record says 0)
	RatePerMinute          *uint64             `json:"ratePerMinute"`
	Burst                  uint64              `json:"burst"`
	IssuedAt               string              `json:"issuedAt"`
	CallsToday             uint64              `json:"callsToday"`
	CreditsToday           uint64              `json:"creditsToday"`
	ConversationsToday     int                 `json:"conversationsToday"`
	Approval               *msg.ApprovalPolicy `json:"approval,omitempty"`
	// Record is "*" when an agent without a record of its own is shown
	// under its controller's default record (msg.DefaultAgent), whose
	// limits these are; omitted for an agent's own record.
	Record string `json:"record,omitempty"`
}

// RouteRegistration is how `route register` registers a revision.
type RouteRegistration struct {
	// Inactive registers a new route inactive: it is not listened on
	// until `route activate`. A new revision keeps its route's state.
	Inactive bool
	// By is who registers it ("uid:N"); the store's account (this
	// process's effective uid) when empty.
	By string
}

// OwnAccount is this process's account as a record names who asked a
// change of a store it opened itself: "uid:N" of its effective uid.
func OwnAccount() string { return fmt.Sprintf("uid:%d", os.Geteuid()) }
