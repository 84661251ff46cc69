package wire_test

import (
	"bytes"
	"fmt"

	"github.com/stewardrt/steward/wire"
)

// Example signs a deterministic CBOR payload as a COSE_Sign1 message,
// frames it with its length prefix under the request bound, reads the frame
// back and verifies it against a keyring that pins the signer: what every
// frame between the operator and the controller goes through.
func Example() {
	key, err := wire.GenerateSigningKey()
	if err != nil {
		panic(err)
	}
	payload, err := wire.Marshal(map[string]any{"t": "inspect", "body": map[string]string{"attempt": "a1"}})
	if err != nil {
		panic(err)
	}
	signed, err := wire.Sign1(key, payload)
	if err != nil {
		panic(err)
	}
	var conn bytes.Buffer
	if err := wire.WriteFrame(&conn, signed, wire.MaxRequestFrame); err != nil {
		panic(err)
	}
	frame, err := wire.ReadFrame(&conn, wire.MaxRequestFrame)
	if err != nil {
		panic(err)
	}
	got, _, err := wire.Verify1(frame, wire.NewKeyring(key.Public()))
	fmt.Println(err, bytes.Equal(got, payload))

	other, _ := wire.GenerateSigningKey()
	_, _, err = wire.Verify1(frame, wire.NewKeyring(other.Public()))
	fmt.Println(err != nil)
	// Output:
	// <nil> true
	// true
}
