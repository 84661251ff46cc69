package wire

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// RawMessage is an undecoded CBOR item, for fields whose shape depends on
// another field (an envelope's body). It is fxamacker's type, aliased so that
// callers need not import the library for it.
type RawMessage = cbor.RawMessage

// encMode and decMode are THE CBOR modes of the whole project. They are
// initialized in their declarations (not in init) so that package-level
// variables built with Marshal see them ready.
var (
	encMode = mustEncMode()
	decMode = mustDecMode()
)

func mustEncMode() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

func mustDecMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   MaxNesting,
		MaxArrayElements:  MaxEntries,
		MaxMapPairs:       MaxEntries,
		IndefLength:       cbor.IndefLengthForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// Marshal encodes v in core deterministic CBOR (RFC 8949 section 4.2.1):
// shortest heads, map keys sorted bytewise, no indefinite lengths. It refuses
// (wrapping ErrMalformed) an encoding that Unmarshal would refuse for nesting
// or entries, so a sender finds out about a bound before its peer does.
func Marshal(v any) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: cbor encode: %w", ErrMalformed, err)
	}
	if err := decMode.Wellformed(b); err != nil {
		return nil, fmt.Errorf("%w: cbor encode: %w", ErrMalformed, err)
	}
	return b, nil
}

// Unmarshal decodes exactly one CBOR item from data into v, strictly: an
// unknown map key for a struct, a duplicate map key, a wrong type, nesting
// past MaxNesting, more than MaxEntries entries in one array or map,
// indefinite lengths, invalid UTF-8 and trailing bytes are all refused, with
// an error wrapping ErrMalformed.
func Unmarshal(data []byte, v any) error {
	if err := decMode.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: cbor decode: %w", ErrMalformed, err)
	}
	return nil
}
