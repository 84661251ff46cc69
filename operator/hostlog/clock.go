package hostlog

// ClockAccept is `steward-operator clock accept`: the operator accepts the
// wall clock, which reads behind the latest time the store recorded (a
// clock that was set forward and then corrected), as the store's time. At
// is the accepted time and Was the latest time before it (unix ms, At <
// Was); By is who asked ("uid:N"), empty on a stopped store.
type ClockAccept struct {
	At  int64  `cbor:"at"`
	Was int64  `cbor:"was"`
	By  string `cbor:"by,omitempty"`
}
