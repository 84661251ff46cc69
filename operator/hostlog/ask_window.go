package hostlog

import "github.com/stewardrt/steward/wire/msg"

// AskWindow gives an ask approved before collect windows (its ask-answer
// record carries no collectBy) its collect window, counted from when the
// upgraded host first read it: the record makes that instant durable, so
// a replay and a snapshot give the same window.
type AskWindow struct {
	Ask       string `cbor:"ask"`
	CollectBy int64  `cbor:"collectBy"`
}

// AskLapsed ends an approval nobody collected within its window: the ask
// goes to its on-timeout verdict (deny) at its collectBy.
type AskLapsed struct {
	Ask     string      `cbor:"ask"`
	Verdict msg.Verdict `cbor:"verdict"`
	At      int64       `cbor:"at"`
}
