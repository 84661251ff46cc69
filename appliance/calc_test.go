package appliance

import (
	"errors"
	"math/big"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"3 * 687 / 365.25", "2748/487"},
		{"1 + 2 * 3", "7"},
		{"(1 + 2) * 3", "9"},
		{"-2^2", "-4"},
		{"(-2)^2", "4"},
		{"2^3^2", "512"},
		{"2**-3", "1/8"},
		{"2 ^ (1 + 1)", "4"},
		{"0.1 + 0.2", "3/10"},
		{".5 + 5. + 1e3 + 2E-2", "25138/25"},
		{"--3", "3"},
		{"+-+3", "-3"},
		{"1 - 2 - 3", "-4"},
		{"12 / 4 / 3", "1"},
		{"0^0", "1"},
		{"(-1)^12345678901234567890", "1"},
		{"(-1)^12345678901234567891", "-1"},
		{"1^99999999999999999999", "1"},
		{"0^5", "0"},
		{"007.500", "15/2"},
		{"1e1000 / 1e1000", "1"},
		{"2^4095 / 2^4094", "2"},
		{" \t1\n+\r1 ", "2"},
	} {
		v, err := evaluate(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if v.RatString() != c.want {
			t.Errorf("%q = %s, want %s", c.expr, v.RatString(), c.want)
		}
	}
}

func TestEvaluateRefusals(t *testing.T) {
	for _, c := range []struct {
		expr, reason string
		pos          int
		msg          string
	}{
		{"1 / 0", "division_by_zero", 3, "division by zero at position 3"},
		{"1 / (2 - 2)", "division_by_zero", 3, "division by zero at position 3"},
		{"0^-1", "division_by_zero", 2, "division by zero (0 to a negative power) at position 2"},
		{"1 +", "syntax", 4, "expected a number or (, found end of expression at position 4"},
		{"(1 + 2", "syntax", 1, "unclosed parenthesis at position 1"},
		{"1 + 2)", "syntax", 6, "unexpected operator ) at position 6"},
		{"2 x 3", "syntax", 3, `unexpected character "x" at position 3`},
		{"é + x", "syntax", 1, `expected a number or (, found character "é" at position 1`},
		{"1 + é", "syntax", 5, `expected a number or (, found character "é" at position 5`},
		{"2^0.5", "syntax", 2, "exponent 1/2 is not an integer at position 2"},
		{"1..2", "syntax", 3, "unexpected number .2 at position 3"},
		{"1e", "syntax", 2, "an exponent needs a digit at position 2"},
		{"1 + 1e1001", "syntax", 6, "exponent exceeds the bound of 1000 at position 6"},
		{"", "syntax", 1, "empty expression at position 1"},
		{"2^4097", "overflow", 2, "result exceeds the bound of 4096 bits at position 2"},
		{"2^99999999999999999999", "overflow", 2, "result exceeds the bound of 4096 bits at position 2"},
		{"1e1000 * 1e1000", "overflow", 8, "result exceeds the bound of 4096 bits at position 8"},
		{"3^2000 * 3^2000", "overflow", 8, "result exceeds the bound of 4096 bits at position 8"},
		{strings.Repeat("(", 65) + "1" + strings.Repeat(")", 65), "syntax", 65, "nesting exceeds the bound of 64 at position 65"},
		{strings.Repeat("-", 65) + "1", "syntax", 65, "nesting exceeds the bound of 64 at position 65"},
	} {
		_, err := evaluate(c.expr)
		var ce *calcError
		if !errors.As(err, &ce) || ce.Reason != c.reason || ce.Pos != c.pos || ce.Error() != c.msg {
			t.Errorf("%q: got %#v, want %s at %d: %q", c.expr, err, c.reason, c.pos, c.msg)
		}
	}
	// At the nesting bound, accepted.
	if _, err := evaluate(strings.Repeat("(", 64) + "1" + strings.Repeat(")", 64)); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	// The expression bound in bytes: at the limit, and one past.
	at := "1" + strings.Repeat("+1", (maxExpressionBytes-1)/2)
	if len(at) != maxExpressionBytes-1 {
		at += " "
	}
	at += " "
	if v, err := evaluate(at); err != nil || len(at) != maxExpressionBytes || v.RatString() != "512" {
		t.Errorf("%d bytes: %v %v", len(at), v, err)
	}
	if _, err := evaluate(at + " "); err == nil || err.Error() != "expression of 1025 bytes exceeds the bound of 1024 at position 1" {
		t.Errorf("1025 bytes: %v", err)
	}
}

func TestDecimalString(t *testing.T) {
	for _, c := range []struct {
		r     string
		prec  int
		want  string
		exact bool
	}{
		{"2748/487", 12, "5.642710472279", false},
		{"1/8", 4, "0.125", true},
		{"1/8", 2, "0.13", false},
		{"-1/8", 2, "-0.13", false},
		{"-1/1000", 2, "0", false},
		{"5", 12, "5", true},
		{"2/3", 0, "1", false},
	} {
		r, _ := new(big.Rat).SetString(c.r)
		got, exact := decimalString(r, c.prec)
		if got != c.want || exact != c.exact {
			t.Errorf("%s at %d: %s %v, want %s %v", c.r, c.prec, got, exact, c.want, c.exact)
		}
	}
}

// FuzzEvaluate checks that the parser never panics, answers or refuses
// with a position inside the expression, and that every answer is within
// the size bound.
func FuzzEvaluate(f *testing.F) {
	f.Add("3 * 687 / 365.25")
	f.Fuzz(func(t *testing.T, expr string) {
		v, err := evaluate(expr)
		if err != nil {
			var ce *calcError
			if !errors.As(err, &ce) {
				t.Fatalf("%q: error of type %T", expr, err)
			}
			if ce.Pos < 1 || ce.Pos > len([]rune(expr))+1 {
				t.Fatalf("%q: position %d outside the expression", expr, ce.Pos)
			}
			return
		}
		if v.Num().BitLen() > maxRatBits || v.Denom().BitLen() > maxRatBits {
			t.Fatalf("%q: answer past the bound", expr)
		}
	})
}
