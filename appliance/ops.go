package appliance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// decodeArgs decodes schema-checked arguments into v, refusing unknown
// members (the schemas already do; this keeps code and schema honest).
func decodeArgs(args json.RawMessage, v any) *refusal {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return &refusal{status: http.StatusUnprocessableEntity, code: codeInvalidArguments, message: "arguments: " + err.Error()}
	}
	return nil
}

func refused(reason, msg string, extra map[string]any) *refusal {
	d := map[string]any{"reason": reason}
	for k, v := range extra {
		d[k] = v
	}
	return &refusal{status: http.StatusUnprocessableEntity, code: codeRefused, message: msg, details: d}
}

type calcArgs struct {
	Expression string       `json:"expression"`
	Precision  *json.Number `json:"precision"`
}

type calcResult struct {
	Fraction  string `json:"fraction"`
	Decimal   string `json:"decimal"`
	Exact     bool   `json:"exact"`
	Precision int    `json:"precision"`
}

func runCalc(args json.RawMessage) (any, *refusal) {
	var a calcArgs
	if r := decodeArgs(args, &a); r != nil {
		return nil, r
	}
	prec := defaultPrecision
	if a.Precision != nil {
		// The schema says integer, and JSON Schema counts 12.0 as one.
		p, ok := new(big.Rat).SetString(a.Precision.String())
		if !ok || !p.IsInt() || p.Sign() < 0 || p.Num().Cmp(big.NewInt(maxPrecision)) > 0 {
			return nil, refused("precision", fmt.Sprintf("precision %s is not an integer from 0 to %d", a.Precision, maxPrecision), nil)
		}
		prec = int(p.Num().Int64())
	}
	v, err := evaluate(a.Expression)
	if err != nil {
		ce := err.(*calcError)
		return nil, refused(ce.Reason, ce.Error(), map[string]any{"position": ce.Pos})
	}
	dec, exact := decimalString(v, prec)
	return calcResult{Fraction: v.RatString(), Decimal: dec, Exact: exact, Precision: prec}, nil
}

type convertArgs struct {
	Value string `json:"value"`
	From  string `json:"from"`
	To    string `json:"to"`
}

type convertResult struct {
	Fraction  string `json:"fraction"`
	Decimal   string `json:"decimal"`
	Exact     bool   `json:"exact"`
	From      string `json:"from"`
	To        string `json:"to"`
	Dimension string `json:"dimension"`
}

// convertPrecision is the digits after the point of a conversion's
// decimal; the fraction is always exact.
const convertPrecision = 12

func runConvert(args json.RawMessage) (any, *refusal) {
	var a convertArgs
	if r := decodeArgs(args, &a); r != nil {
		return nil, r
	}
	v, err := parseValue(a.Value)
	if err != nil {
		return nil, refused("value", err.Error(), nil)
	}
	from, err := parseUnit(a.From)
	if err != nil {
		return nil, refused("unit", "from: "+err.Error(), nil)
	}
	to, err := parseUnit(a.To)
	if err != nil {
		return nil, refused("unit", "to: "+err.Error(), nil)
	}
	out, err := convert(v, from, to)
	if err != nil {
		return nil, refused("incompatible_dimensions", err.Error(), map[string]any{"from": from.dimension, "to": to.dimension})
	}
	dec, exact := decimalString(out, convertPrecision)
	return convertResult{Fraction: out.RatString(), Decimal: dec, Exact: exact, From: from.symbol, To: to.symbol, Dimension: from.dimension}, nil
}

type durationArgs struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type durationResult struct {
	Seconds  json.Number `json:"seconds"`
	Human    string      `json:"human"`
	Negative bool        `json:"negative"`
}

func runDuration(args json.RawMessage) (any, *refusal) {
	var a durationArgs
	if r := decodeArgs(args, &a); r != nil {
		return nil, r
	}
	from, err := time.Parse(time.RFC3339Nano, a.From)
	if err != nil {
		return nil, refused("time", "from: not an RFC 3339 time: "+err.Error(), nil)
	}
	to, err := time.Parse(time.RFC3339Nano, a.To)
	if err != nil {
		return nil, refused("time", "to: not an RFC 3339 time: "+err.Error(), nil)
	}
	// time.Sub saturates past 292 years; whole seconds and nanoseconds
	// are subtracted separately instead, exactly.
	secs := to.Unix() - from.Unix()
	nanos := int64(to.Nanosecond() - from.Nanosecond())
	total := new(big.Rat).Add(new(big.Rat).SetInt64(secs), big.NewRat(nanos, 1e9))
	neg := total.Sign() < 0
	s, _ := decimalString(total, 9)
	return durationResult{Seconds: json.Number(s), Human: humanDuration(new(big.Rat).Abs(total), neg), Negative: neg}, nil
}

// humanDuration writes d (seconds, not negative) as days, hours, minutes
// and seconds, leaving out zero parts, e.g. "1 day 2 hours 4.5 seconds".
func humanDuration(d *big.Rat, neg bool) string {
	whole := new(big.Int).Quo(d.Num(), d.Denom())
	frac := new(big.Rat).Sub(d, new(big.Rat).SetInt(whole))
	var parts []string
	unit := func(n int64, name string) {
		if n == 0 {
			return
		}
		if n != 1 {
			name += "s"
		}
		parts = append(parts, strconv.FormatInt(n, 10)+" "+name)
	}
	w := whole.Int64() // at most about 3.2e11 for years 0000 to 9999
	unit(w/86400, "day")
	unit(w%86400/3600, "hour")
	unit(w%3600/60, "minute")
	sec := new(big.Rat).Add(new(big.Rat).SetInt64(w%60), frac)
	if sec.Sign() != 0 || len(parts) == 0 {
		s, _ := decimalString(sec, 9)
		name := " seconds"
		if s == "1" {
			name = " second"
		}
		parts = append(parts, s+name)
	}
	out := strings.Join(parts, " ")
	if neg {
		out = "-" + out
	}
	return out
}

type sha256Args struct {
	Text string `json:"text"`
}

type sha256Result struct {
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

func runSHA256(args json.RawMessage) (any, *refusal) {
	var a sha256Args
	if r := decodeArgs(args, &a); r != nil {
		return nil, r
	}
	sum := sha256.Sum256([]byte(a.Text))
	return sha256Result{SHA256: hex.EncodeToString(sum[:]), Bytes: len(a.Text)}, nil
}
