package appliance

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// A unit is a dimension and an exact affine map to the dimension's base
// unit: base = value*factor + offset. Only temperatures have an offset.
type unit struct {
	symbol    string // canonical symbol, e.g. "km", "µs", "°C"
	dimension string // length, mass, time, data, temperature
	factor    *big.Rat
	offset    *big.Rat // nil for 0
}

const maxUnitBytes = 32

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("appliance: bad constant " + s)
	}
	return r
}

// namedUnits are the units taken whole, before any prefix is tried. The
// factors are exact by definition (sources in the descriptor): the inch
// is 0.0254 m and the pound 0.45359237 kg since the 1959 international
// yard and pound agreement, the astronomical unit 149,597,870,700 m (IAU
// 2012), the light-year a Julian year of light, the Julian year 365.25 d.
var namedUnits = map[string]unit{}

// Base symbols that take prefixes, and which prefixes they take.
var prefixable = []struct {
	base      string
	dimension string
	factor    *big.Rat // of the unprefixed base symbol
	onlyBig   bool     // data sizes: no sub-multiples
	iec       bool     // data sizes: Ki, Mi, ...
}{
	{"bit", "data", rat("1/8"), true, true},
	{"B", "data", rat("1"), true, true},
	{"m", "length", rat("1"), false, false},
	{"g", "mass", rat("1/1000"), false, false},
	{"s", "time", rat("1"), false, false},
	{"K", "temperature", rat("1"), false, false},
}

// siPrefixes are the SI prefixes (SI Brochure, 9th edition, 2022
// amendment). "u" is accepted for micro and written "µ".
var siPrefixes = map[string]int{
	"q": -30, "r": -27, "y": -24, "z": -21, "a": -18, "f": -15, "p": -12, "n": -9,
	"µ": -6, "μ": -6, "u": -6, "m": -3, "c": -2, "d": -1,
	"da": 1, "h": 2, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18, "Z": 21, "Y": 24, "R": 27, "Q": 30,
}

// iecPrefixes are the binary prefixes of IEC 80000-13.
var iecPrefixes = map[string]int{"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60, "Zi": 70, "Yi": 80}

func init() {
	add := func(dim, factor string, offset string, symbols ...string) {
		u := unit{symbol: symbols[0], dimension: dim, factor: rat(factor)}
		if offset != "" {
			u.offset = rat(offset)
		}
		for _, s := range symbols {
			namedUnits[s] = u
		}
	}
	add("length", "1", "", "m", "meter", "metre")
	add("length", "0.0254", "", "in", "inch")
	add("length", "0.3048", "", "ft", "foot")
	add("length", "0.9144", "", "yd", "yard")
	add("length", "1609.344", "", "mi", "mile")
	add("length", "1852", "", "nmi", "nautical-mile")
	add("length", "149597870700", "", "au")
	add("length", "9460730472580800", "", "ly", "light-year")
	add("length", "1/10000000000", "", "Å", "angstrom")
	add("mass", "1", "", "kg", "kilogram")
	add("mass", "1/1000", "", "g", "gram")
	add("mass", "1000", "", "t", "tonne")
	add("mass", "0.45359237", "", "lb", "pound")
	add("mass", "0.028349523125", "", "oz", "ounce")
	add("mass", "6.35029318", "", "st", "stone")
	add("mass", "0.00006479891", "", "gr", "grain")
	add("mass", "0.0002", "", "ct", "carat")
	add("time", "1", "", "s", "second")
	add("time", "60", "", "min", "minute")
	add("time", "3600", "", "h", "hour")
	add("time", "86400", "", "d", "day")
	add("time", "604800", "", "wk", "week")
	add("time", "31557600", "", "yr", "julian-year")
	add("data", "1", "", "B", "byte", "octet")
	add("data", "1/8", "", "bit")
	add("temperature", "1", "", "K", "kelvin")
	add("temperature", "1", "273.15", "°C", "degC", "celsius")
	add("temperature", "5/9", "45967/180", "°F", "degF", "fahrenheit")
	add("temperature", "5/9", "", "°R", "degR", "rankine")
}

// unitError is a refusal of a unit string.
type unitError struct{ msg string }

func (e *unitError) Error() string { return e.msg }

// parseUnit reads a unit symbol: a named unit, or an SI prefix on m, g, s,
// K, B or bit, or an IEC prefix on B or bit (data sizes take no
// sub-multiples). Symbols are case-sensitive. Ambiguous spellings such as
// "KB" or "Mb" are refused with the two readings named, never guessed.
func parseUnit(s string) (unit, error) {
	if s == "" {
		return unit{}, &unitError{"empty unit"}
	}
	if len(s) > maxUnitBytes {
		return unit{}, &unitError{fmt.Sprintf("unit of %d bytes exceeds the bound of %d", len(s), maxUnitBytes)}
	}
	if u, ok := namedUnits[s]; ok {
		return u, nil
	}
	for _, b := range prefixable {
		if !strings.HasSuffix(s, b.base) || len(s) == len(b.base) {
			continue
		}
		p := s[:len(s)-len(b.base)]
		if b.iec {
			if n, ok := iecPrefixes[p]; ok {
				f := new(big.Rat).Mul(b.factor, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(n))))
				return unit{symbol: p + b.base, dimension: b.dimension, factor: f}, nil
			}
		}
		n, ok := siPrefixes[p]
		if !ok {
			continue
		}
		if b.onlyBig && n < 3 {
			return unit{}, &unitError{fmt.Sprintf("prefix %s is not used with %s", p, b.base)}
		}
		if p == "u" || p == "μ" {
			p = "µ"
		}
		return unit{symbol: p + b.base, dimension: b.dimension, factor: new(big.Rat).Mul(b.factor, pow10(n))}, nil
	}
	if p, ok := strings.CutSuffix(s, "b"); ok && (p == "" || siPrefixes[p] >= 3 || iecPrefixes[p] > 0) {
		return unit{}, &unitError{fmt.Sprintf("%s is ambiguous: write bit for bits or B for bytes (e.g. %sbit or %sB)", strconv.Quote(s), p, p)}
	}
	if s == "KB" {
		return unit{}, &unitError{`"KB" is ambiguous: write kB for 1000 B or KiB for 1024 B`}
	}
	return unit{}, &unitError{fmt.Sprintf("unknown unit %s", strconv.Quote(s))}
}

func pow10(n int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(n))), nil)
	if n < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// convert maps v from one unit to another of the same dimension, exactly.
func convert(v *big.Rat, from, to unit) (*big.Rat, error) {
	if from.dimension != to.dimension {
		return nil, &unitError{fmt.Sprintf("cannot convert %s (%s) to %s (%s)", from.symbol, from.dimension, to.symbol, to.dimension)}
	}
	base := new(big.Rat).Mul(v, from.factor)
	if from.offset != nil {
		base.Add(base, from.offset)
	}
	if to.offset != nil {
		base.Sub(base, to.offset)
	}
	return base.Quo(base, to.factor), nil
}

// parseValue reads the value of a conversion: an optional sign and a
// decimal literal, as in calc.evaluate (no spaces, no expression).
func parseValue(s string) (*big.Rat, error) {
	const maxValueBytes = 100
	if len(s) > maxValueBytes {
		return nil, &unitError{fmt.Sprintf("value of %d bytes exceeds the bound of %d", len(s), maxValueBytes)}
	}
	body, neg := s, false
	if len(body) > 0 && (body[0] == '-' || body[0] == '+') {
		neg = body[0] == '-'
		body = body[1:]
	}
	if body == "" || !(body[0] >= '0' && body[0] <= '9' || body[0] == '.') {
		return nil, &unitError{fmt.Sprintf("value %s is not a decimal number", strconv.Quote(s))}
	}
	v, end, err := scanDecimal(body, 0)
	if err != nil {
		return nil, &unitError{fmt.Sprintf("value %s: %s", strconv.Quote(s), err.msg)}
	}
	if end != len(body) {
		return nil, &unitError{fmt.Sprintf("value %s is not a decimal number", strconv.Quote(s))}
	}
	if neg {
		v.Neg(v)
	}
	return v, nil
}
