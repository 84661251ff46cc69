package installer

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// cborToJSON renders one CBOR item (a journal record's body) as JSON for the
// operator's audit, by these rules (documented in doc.go):
//
//   - a byte string becomes a JSON string of lowercase hex (hashes,
//     receipts, and the JSON bytes a record keeps, such as a rebind's
//     configs, whose exact bytes the audit may need to hash);
//   - a text string, bool, null and array stay what they are;
//   - an integer stays an exact JSON number (up to 64 bits; a bignum tag
//     becomes its decimal digits as a number too);
//   - a map becomes an object; its keys must be text strings (steward's
//     records have no other), else the record is refused;
//   - a float becomes a number (NaN and infinities are refused);
//   - a time tag (0 or 1) becomes an RFC 3339 string in UTC; any other tag
//     becomes {"tag": N, "value": ...}; undefined becomes null.
var cborRender = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:       cbor.DupMapKeyEnforcedAPF,
		IndefLength:     cbor.IndefLengthForbidden,
		MaxNestedLevels: 32,
		DefaultMapType:  nil,
		BigIntDec:       cbor.BigIntDecodePointer,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

func cborToJSON(b []byte) (json.RawMessage, error) {
	var v any
	if err := cborRender.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	j, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// hexBytes marshals as a hex string.
type hexBytes []byte

func (h hexBytes) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

func jsonable(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, uint64, int64:
		return x, nil
	case []byte:
		return hexBytes(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("float %v has no JSON form", x)
		}
		return x, nil
	case float32:
		return jsonable(float64(x))
	case *big.Int:
		return json.Number(x.String()), nil
	case big.Int:
		return json.Number(x.String()), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			out[i] = j
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("map key %v is a %T, not a text string", k, k)
			}
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			out[ks] = j
		}
		return out, nil
	case map[string]any:
		m := make(map[any]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		return jsonable(m)
	case cbor.Tag:
		c, err := jsonable(x.Content)
		if err != nil {
			return nil, err
		}
		return map[string]any{"tag": x.Number, "value": c}, nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case cbor.SimpleValue:
		return map[string]any{"simple": uint8(x)}, nil
	}
	return nil, fmt.Errorf("CBOR value of type %T has no JSON form here", v)
}
