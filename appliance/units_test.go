package appliance

import (
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestConvert(t *testing.T) {
	for _, c := range []struct{ value, from, to, want string }{
		{"1", "mi", "km", "25146/15625"},
		{"1", "in", "mm", "127/5"},
		{"1", "ft", "in", "12"},
		{"1", "nmi", "m", "1852"},
		{"1", "ly", "au", "9460730472580800/149597870700"},
		{"1", "lb", "kg", "45359237/100000000"},
		{"16", "oz", "lb", "1"},
		{"1", "st", "lb", "14"},
		{"7000", "gr", "lb", "1"},
		{"1", "kg", "g", "1000"},
		{"1", "t", "Mg", "1"},
		{"5", "ct", "g", "1"},
		{"1", "µg", "ug", "1"},
		{"1", "μs", "ns", "1000"},
		{"1", "yr", "d", "1461/4"},
		{"1", "wk", "min", "10080"},
		{"1", "h", "s", "3600"},
		{"1", "d", "ks", "432/5"},
		{"1", "KiB", "B", "1024"},
		{"1", "GiB", "MB", "16777216/15625"},
		{"8", "bit", "B", "1"},
		{"1", "Gbit", "MB", "125"},
		{"1", "Mibit", "KiB", "128"},
		{"1", "QB", "RB", "1000"},
		{"1", "YiB", "ZiB", "1024"},
		{"0", "°C", "K", "5463/20"},
		{"100", "°C", "°F", "212"},
		{"-40", "°F", "°C", "-40"},
		{"0", "K", "°R", "0"},
		{"491.67", "°R", "°C", "0"},
		{"1", "mK", "K", "1/1000"},
		{"1e3", "m", "km", "1"},
		{"+.5", "dam", "m", "5"},
		{"1", "Å", "nm", "1/10"},
		{"1", "metre", "meter", "1"},
	} {
		v, err := parseValue(c.value)
		if err != nil {
			t.Errorf("%s: %v", c.value, err)
			continue
		}
		from, err1 := parseUnit(c.from)
		to, err2 := parseUnit(c.to)
		if err1 != nil || err2 != nil {
			t.Errorf("%s -> %s: %v %v", c.from, c.to, err1, err2)
			continue
		}
		got, err := convert(v, from, to)
		if err != nil {
			t.Errorf("%s %s -> %s: %v", c.value, c.from, c.to, err)
			continue
		}
		want, _ := parseFraction(c.want)
		if got.Cmp(want) != 0 {
			t.Errorf("%s %s -> %s = %s, want %s", c.value, c.from, c.to, got.RatString(), c.want)
		}
	}
}

func TestUnitRefusals(t *testing.T) {
	for s, want := range map[string]string{
		"":                      "empty unit",
		"KB":                    `"KB" is ambiguous: write kB for 1000 B or KiB for 1024 B`,
		"kb":                    `"kb" is ambiguous: write bit for bits or B for bytes (e.g. kbit or kB)`,
		"Mb":                    `"Mb" is ambiguous: write bit for bits or B for bytes (e.g. Mbit or MB)`,
		"mB":                    "prefix m is not used with B",
		"hbit":                  "prefix h is not used with bit",
		"furlong":               `unknown unit "furlong"`,
		"M":                     `unknown unit "M"`,
		"kdegC":                 `unknown unit "kdegC"`,
		"KM":                    `unknown unit "KM"`,
		strings.Repeat("m", 33): "unit of 33 bytes exceeds the bound of 32",
	} {
		if _, err := parseUnit(s); err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", s, err, want)
		}
	}
	// 32 bytes is within the bound (and unknown).
	if _, err := parseUnit(strings.Repeat("x", 32)); err == nil || !strings.HasPrefix(err.Error(), "unknown unit") {
		t.Errorf("32 bytes: %v", err)
	}
	km, _ := parseUnit("km")
	kg, _ := parseUnit("kg")
	if _, err := convert(ratOne(), km, kg); err == nil || err.Error() != "cannot convert km (length) to kg (mass)" {
		t.Errorf("km to kg: %v", err)
	}
	for s, want := range map[string]string{
		"abc":                    `value "abc" is not a decimal number`,
		"1 ":                     `value "1 " is not a decimal number`,
		"--1":                    `value "--1" is not a decimal number`,
		"1e":                     `value "1e": an exponent needs a digit`,
		"1e1001":                 `value "1e1001": exponent exceeds the bound of 1000`,
		"":                       `value "" is not a decimal number`,
		strings.Repeat("1", 101): "value of 101 bytes exceeds the bound of 100",
	} {
		if _, err := parseValue(s); err == nil || err.Error() != want {
			t.Errorf("value %q: got %v, want %q", s, err, want)
		}
	}
	if _, err := parseValue(strings.Repeat("1", 100)); err != nil {
		t.Errorf("100 bytes: %v", err)
	}
}

// FuzzParseUnit checks the unit parser never panics, refuses with one
// line, and that what it accepts converts to itself exactly.
func FuzzParseUnit(f *testing.F) {
	f.Add("km")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseUnit(s)
		if err != nil {
			if strings.ContainsRune(err.Error(), '\n') && utf8.ValidString(s) {
				t.Fatalf("%q: multi-line error %q", s, err)
			}
			return
		}
		if u.factor.Sign() <= 0 || u.symbol == "" {
			t.Fatalf("%q: parsed as %+v", s, u)
		}
		v, _ := parseFraction("17/3")
		back, err := convert(v, u, u)
		if err != nil || back.Cmp(v) != 0 {
			t.Fatalf("%q: does not convert to itself: %v %v", s, back, err)
		}
		again, err := parseUnit(u.symbol)
		if err != nil || again.factor.Cmp(u.factor) != 0 || again.dimension != u.dimension {
			t.Fatalf("%q: canonical symbol %q does not parse back: %v", s, u.symbol, err)
		}
	})
}

// FuzzParseValue checks the value parser against its schema's promise:
// never a panic, and an accepted value is a finite exact number.
func FuzzParseValue(f *testing.F) {
	f.Add("98.6")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseValue(s)
		if err == nil && (v.Num().BitLen() > maxRatBits || v.Denom().BitLen() > maxRatBits) {
			t.Fatalf("%q: past the size bound", s)
		}
	})
}

func parseFraction(s string) (*big.Rat, bool) { return new(big.Rat).SetString(s) }

func ratOne() *big.Rat { return big.NewRat(1, 1) }
