package protocol

// decimal is the exact value of a JSON number: 0.digits × 10^pos, with no
// leading or trailing zeros in digits; zero has no digits.
type decimal struct {
	neg    bool
	digits []byte
	pos    int64
}

// parseDecimal reads a valid JSON number literal exactly. The exponent is
// clamped so that an absurd one ("1e999999999999999999999") cannot overflow.
func parseDecimal(s []byte) decimal {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	var frac int64
	seenDot := false
	for ; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
		switch c := s[i]; {
		case c == '.':
			seenDot = true
		case c == '0' && len(d.digits) == 0:
			if seenDot {
				frac++
			}
		default:
			d.digits = append(d.digits, c)
			if seenDot {
				frac++
			}
		}
	}
	var exp int64
	if i < len(s) {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		for ; i < len(s); i++ {
			if exp < 1<<40 {
				exp = exp*10 + int64(s[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	// value = digits × 10^(exp-frac) = 0.digits × 10^(len(digits)+exp-frac)
	d.pos = int64(len(d.digits)) + exp - frac
	for len(d.digits) > 0 && d.digits[len(d.digits)-1] == '0' {
		d.digits = d.digits[:len(d.digits)-1]
	}
	if len(d.digits) == 0 {
		return decimal{}
	}
	return d
}

func (d decimal) sign() int {
	switch {
	case len(d.digits) == 0:
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmp compares a and b: -1, 0 or 1.
func (a decimal) cmp(b decimal) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb || sa == 0 {
		return cmpInt(int64(sa), int64(sb))
	}
	// same sign, both non-zero: compare magnitudes, then flip for negatives.
	m := cmpInt(a.pos, b.pos)
	if m == 0 {
		m = cmpDigits(a.digits, b.digits)
	}
	return m * sa
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpDigits(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmpInt(int64(a[i]), int64(b[i]))
		}
	}
	// no trailing zeros: the longer one has more non-zero digits.
	return cmpInt(int64(len(a)), int64(len(b)))
}
