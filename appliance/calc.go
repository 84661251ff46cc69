package appliance

import (
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"
)

// Bounds of calc.evaluate. An answer's numerator and denominator are each
// at most maxRatBits bits (about 1,233 decimal digits); an operation whose
// result would pass that is refused as an overflow before it is computed
// where that can be known (powers), and after it otherwise (the operands
// are bounded, so the product of two is at most twice the bound).
const (
	maxExpressionBytes = 1024
	maxRatBits         = 4096
	maxDecimalExponent = 1000 // |e| in a literal such as 1e1000
	maxNesting         = 64   // parentheses and unary signs, nested
	defaultPrecision   = 12
	maxPrecision       = 100
)

// calcError is a refusal of an expression at a position: the 1-based
// column, counted in characters.
type calcError struct {
	Reason string // "syntax", "division_by_zero", "overflow"
	Pos    int
	Msg    string
}

func (e *calcError) Error() string {
	return fmt.Sprintf("%s at position %d", e.Msg, e.Pos)
}

// evaluate computes expr exactly. The grammar:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ ("^" | "**") unary ]      (right associative)
//	primary = number | "(" expr ")"
//	number  = digits [ "." [digits] ] [ ("e"|"E") ["+"|"-"] digits ]
//	        | "." digits [ exponent ]
//
// so -2^2 is -4 and 2^3^2 is 512. An exponent must evaluate to an integer.
// Blanks (space, tab, newline) may appear between tokens.
func evaluate(expr string) (*big.Rat, error) {
	if len(expr) > maxExpressionBytes {
		return nil, &calcError{"syntax", 1, fmt.Sprintf("expression of %d bytes exceeds the bound of %d", len(expr), maxExpressionBytes)}
	}
	if !utf8.ValidString(expr) {
		return nil, &calcError{"syntax", 1, "expression is not valid UTF-8"}
	}
	p := &calcParser{src: expr}
	p.next()
	if p.tok.kind == tokEOF {
		return nil, p.errAt(p.tok.pos, "syntax", "empty expression")
	}
	v, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.errAt(p.tok.pos, "syntax", "unexpected "+p.tok.describe())
	}
	return v, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokNum
	tokOp // one of + - * / ^ ( ) ; "**" is folded into ^
	tokBad
)

type token struct {
	kind tokKind
	pos  int // byte offset
	op   byte
	text string
	num  *big.Rat
	err  *calcError
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokNum:
		return "number " + t.text
	case tokOp:
		if t.op == '^' && t.text == "**" {
			return "operator **"
		}
		return "operator " + string(t.op)
	}
	return "character " + fmt.Sprintf("%q", t.text)
}

type calcParser struct {
	src   string
	pos   int
	tok   token
	depth int
}

func (p *calcParser) errAt(byteOff int, reason, msg string) *calcError {
	return &calcError{Reason: reason, Pos: utf8.RuneCountInString(p.src[:byteOff]) + 1, Msg: msg}
}

// next reads the next token into p.tok.
func (p *calcParser) next() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{kind: tokEOF, pos: start}
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '*' && strings.HasPrefix(p.src[p.pos:], "**"):
		p.pos += 2
		p.tok = token{kind: tokOp, pos: start, op: '^', text: "**"}
	case strings.IndexByte("+-*/^()", c) >= 0:
		p.pos++
		p.tok = token{kind: tokOp, pos: start, op: c, text: string(c)}
	case c >= '0' && c <= '9' || c == '.':
		n, end, err := scanDecimal(p.src, p.pos)
		p.pos = end
		if err != nil {
			p.tok = token{kind: tokBad, pos: start, text: p.src[start:end], err: p.errAt(err.off, "syntax", err.msg)}
			return
		}
		p.tok = token{kind: tokNum, pos: start, text: p.src[start:end], num: n}
	default:
		_, size := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += size
		p.tok = token{kind: tokBad, pos: start, text: p.src[start:p.pos]}
	}
}

// unexpected is the error for the current token where something else was
// needed.
func (p *calcParser) unexpected(want string) *calcError {
	if p.tok.kind == tokBad && p.tok.err != nil {
		return p.tok.err
	}
	return p.errAt(p.tok.pos, "syntax", "expected "+want+", found "+p.tok.describe())
}

func (p *calcParser) enter() *calcError {
	p.depth++
	if p.depth > maxNesting {
		return p.errAt(p.tok.pos, "syntax", fmt.Sprintf("nesting exceeds the bound of %d", maxNesting))
	}
	return nil
}

func (p *calcParser) expr() (*big.Rat, error) {
	v, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokOp && (p.tok.op == '+' || p.tok.op == '-') {
		op, at := p.tok.op, p.tok.pos
		p.next()
		w, err := p.term()
		if err != nil {
			return nil, err
		}
		if op == '+' {
			v = new(big.Rat).Add(v, w)
		} else {
			v = new(big.Rat).Sub(v, w)
		}
		if err := p.checkSize(v, at); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (p *calcParser) term() (*big.Rat, error) {
	v, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokOp && (p.tok.op == '*' || p.tok.op == '/') {
		op, at := p.tok.op, p.tok.pos
		p.next()
		w, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op == '*' {
			v = new(big.Rat).Mul(v, w)
		} else {
			if w.Sign() == 0 {
				return nil, p.errAt(at, "division_by_zero", "division by zero")
			}
			v = new(big.Rat).Quo(v, w)
		}
		if err := p.checkSize(v, at); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (p *calcParser) unary() (*big.Rat, error) {
	if p.tok.kind == tokOp && (p.tok.op == '-' || p.tok.op == '+') {
		if err := p.enter(); err != nil {
			return nil, err
		}
		neg := p.tok.op == '-'
		p.next()
		v, err := p.unary()
		p.depth--
		if err != nil {
			return nil, err
		}
		if neg {
			v = new(big.Rat).Neg(v)
		}
		return v, nil
	}
	return p.power()
}

func (p *calcParser) power() (*big.Rat, error) {
	base, err := p.primary()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokOp || p.tok.op != '^' {
		return base, nil
	}
	at := p.tok.pos
	p.next()
	if err := p.enter(); err != nil {
		return nil, err
	}
	exp, err := p.unary()
	p.depth--
	if err != nil {
		return nil, err
	}
	return p.pow(base, exp, at)
}

func (p *calcParser) primary() (*big.Rat, error) {
	switch {
	case p.tok.kind == tokNum:
		v := p.tok.num
		p.next()
		return v, nil
	case p.tok.kind == tokOp && p.tok.op == '(':
		if err := p.enter(); err != nil {
			return nil, err
		}
		open := p.tok.pos
		p.next()
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokOp || p.tok.op != ')' {
			if p.tok.kind == tokEOF {
				return nil, p.errAt(open, "syntax", "unclosed parenthesis")
			}
			return nil, p.unexpected(")")
		}
		p.depth--
		p.next()
		return v, nil
	}
	return nil, p.unexpected("a number or (")
}

// pow raises base to an integer exponent, refusing before computing when
// the result would pass maxRatBits.
func (p *calcParser) pow(base, exp *big.Rat, at int) (*big.Rat, error) {
	if !exp.IsInt() {
		return nil, p.errAt(at, "syntax", "exponent "+exp.RatString()+" is not an integer")
	}
	e := exp.Num()
	if base.Sign() == 0 {
		switch e.Sign() {
		case -1:
			return nil, p.errAt(at, "division_by_zero", "division by zero (0 to a negative power)")
		case 0:
			return big.NewRat(1, 1), nil
		}
		return new(big.Rat), nil
	}
	num, den := new(big.Int).Abs(base.Num()), base.Denom()
	if num.BitLen() == 1 && den.BitLen() == 1 { // base is 1 or -1
		if base.Sign() < 0 && e.Bit(0) == 1 {
			return big.NewRat(-1, 1), nil
		}
		return big.NewRat(1, 1), nil
	}
	// |base^e| has about bitlen*|e| bits in its numerator or denominator.
	abs := new(big.Int).Abs(e)
	if !abs.IsInt64() || abs.Int64() > maxRatBits {
		return nil, p.errAt(at, "overflow", fmt.Sprintf("result exceeds the bound of %d bits", maxRatBits))
	}
	n := abs.Int64()
	bits := int64(max(num.BitLen()-1, den.BitLen()-1, 1))
	if bits*n > maxRatBits {
		return nil, p.errAt(at, "overflow", fmt.Sprintf("result exceeds the bound of %d bits", maxRatBits))
	}
	rn := new(big.Int).Exp(base.Num(), abs, nil)
	rd := new(big.Int).Exp(den, abs, nil)
	if e.Sign() < 0 {
		rn, rd = rd, rn
	}
	v := new(big.Rat).SetFrac(rn, rd)
	if err := p.checkSize(v, at); err != nil {
		return nil, err
	}
	return v, nil
}

func (p *calcParser) checkSize(v *big.Rat, at int) error {
	if v.Num().BitLen() > maxRatBits || v.Denom().BitLen() > maxRatBits {
		return p.errAt(at, "overflow", fmt.Sprintf("result exceeds the bound of %d bits", maxRatBits))
	}
	return nil
}

// scanError is a failure inside a number, at a byte offset of the source.
type scanError struct {
	off int
	msg string
}

// scanDecimal reads a decimal literal at src[start:] and returns its exact
// value and the offset just after it.
func scanDecimal(src string, start int) (*big.Rat, int, *scanError) {
	i := start
	digits := func() int {
		n := 0
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
			n++
		}
		return n
	}
	intDigits := digits()
	mantEnd := i
	fracDigits := 0
	if i < len(src) && src[i] == '.' {
		i++
		fracDigits = digits()
		mantEnd = i
	}
	if intDigits == 0 && fracDigits == 0 {
		return nil, i, &scanError{start, "a number needs a digit"}
	}
	exp := 0
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		expAt := i
		i++
		neg := false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			neg = src[i] == '-'
			i++
		}
		ds := i
		if digits() == 0 {
			return nil, i, &scanError{expAt, "an exponent needs a digit"}
		}
		for _, c := range src[ds:i] {
			exp = exp*10 + int(c-'0')
			if exp > maxDecimalExponent {
				return nil, i, &scanError{expAt, fmt.Sprintf("exponent exceeds the bound of %d", maxDecimalExponent)}
			}
		}
		if neg {
			exp = -exp
		}
	}
	mant := strings.Replace(src[start:mantEnd], ".", "", 1)
	num, ok := new(big.Int).SetString(strings.TrimLeft(mant, "0")+"0", 10)
	if !ok {
		return nil, i, &scanError{start, "invalid number"}
	}
	// mant+"0" is ten times the digits; divide it back out below.
	scale := fracDigits + 1 - exp
	den := big.NewInt(1)
	ten := big.NewInt(10)
	if scale >= 0 {
		den.Exp(ten, big.NewInt(int64(scale)), nil)
	} else {
		num.Mul(num, new(big.Int).Exp(ten, big.NewInt(int64(-scale)), nil))
	}
	v := new(big.Rat).SetFrac(num, den)
	if v.Num().BitLen() > maxRatBits || v.Denom().BitLen() > maxRatBits {
		return nil, i, &scanError{start, fmt.Sprintf("number exceeds the bound of %d bits", maxRatBits)}
	}
	return v, i, nil
}

// decimalString rounds r to prec digits after the point (halves away from
// zero), drops trailing zeros, and says whether the result is exact.
func decimalString(r *big.Rat, prec int) (string, bool) {
	s := r.FloatString(prec)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)))
	return s, scaled.IsInt()
}
