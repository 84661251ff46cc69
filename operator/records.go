package operator

// Journal record kinds of the host journal (see doc.go).
const (
	kindControllerAdd = "controller-add"
	kindPurseFund     = "purse-fund"
	kindPurseFreeze   = "purse-freeze"
	kindPurseThaw     = "purse-thaw"
	kindGrantIssue    = "grant-issue"
	kindGrantRevoke   = "grant-revoke"
	kindRouteRegister = "route-register"
	kindReserve       = "reserve"
	kindNotSent       = "not-sent"
	kindUncertain     = "uncertain"
	kindOutcome       = "outcome"
	kindCheckpoint    = "checkpoint"
)

type recControllerAdd struct {
	Name string `cbor:"name"`
	UID  uint32 `cbor:"uid"`
	Keys []byte `cbor:"keys"`
}

type recPurseFund struct {
	Controller string `cbor:"controller"`
	Amount     uint64 `cbor:"amount"`
	Ledger     uint64 `cbor:"ledger"`
}

type recPurse struct {
	Controller string `cbor:"controller"`
}

type recGrantIssue struct {
	Grant []byte `cbor:"grant"`
}

type recGrantRevoke struct {
	ID string `cbor:"id"`
}

type recRouteRegister struct {
	Record []byte `cbor:"record"`
}

type recReserve struct {
	Attempt       string `cbor:"attempt"`
	Controller    string `cbor:"controller"`
	Grant         string `cbor:"grant"`
	Application   string `cbor:"application"`
	Operation     string `cbor:"operation"`
	Kind          string `cbor:"kind"`
	RequestSHA256 []byte `cbor:"requestSha256"`
	Charge        uint64 `cbor:"charge"`
	Consent       []byte `cbor:"consent"`
	Day           int64  `cbor:"day"`
	Ledger        uint64 `cbor:"ledger"`
}

type recNotSent struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
	Ledger  uint64 `cbor:"ledger"`
}

type recUncertain struct {
	Attempt string `cbor:"attempt"`
	Detail  string `cbor:"detail"`
}

type recOutcome struct {
	Attempt string `cbor:"attempt"`
	Status  int    `cbor:"status"`
	Body    []byte `cbor:"body"`
	Receipt []byte `cbor:"receipt"`
	Seq     uint64 `cbor:"receiptSeq"` // the receipt's Seq, so Open need not parse it
	Ledger  uint64 `cbor:"ledger"`
}

type recCheckpoint struct {
	Checkpoint []byte `cbor:"checkpoint"`
	Seq        uint64 `cbor:"seq"` // the receipt sequence it covers
}
