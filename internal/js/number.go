package js

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Number is JavaScript's Number(v) of a decoded value.
func Number(v any) float64 {
	switch v := v.(type) {
	case nil:
		return 0
	case bool:
		if v {
			return 1
		}
		return 0
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			// Out of float64 range: JavaScript yields ±Infinity.
			if strings.HasPrefix(string(v), "-") {
				return math.Inf(-1)
			}
			return math.Inf(1)
		}
		return f
	case float64:
		return v
	case string:
		return StringToNumber(v)
	case []any:
		// ToPrimitive of an array is its String(): "" for [] and [null],
		// the element's for [x], a comma (never a number) for more.
		return StringToNumber(String(v))
	}
	return math.NaN()
}

// StringToNumber is the StringToNumber abstract operation: Number(s).
func StringToNumber(s string) float64 {
	s = Trim(s)
	if s == "" {
		return 0
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			return radixToNumber(s[2:], base)
		}
	}
	if !isDecimalLiteral(s) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return f // out of range: ±Inf or 0, as JavaScript rounds
}

// radixToNumber converts the digits of a 0x, 0o or 0b literal. JavaScript
// takes any number of digits and rounds the integer to the nearest double
// (ties to even; Infinity past the largest), where a 64-bit parse overflows.
func radixToNumber(digits string, base int) float64 {
	n, err := strconv.ParseUint(digits, base, 64)
	if err == nil {
		return float64(n) // rounds to nearest even, as JavaScript does
	}
	if !errors.Is(err, strconv.ErrRange) {
		return math.NaN() // also a sign or '_', which ParseUint rejects
	}
	// ParseUint stops at the overflow: the rest is still to be checked.
	// digits starts with a digit, so SetString sees no sign.
	x, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return math.NaN()
	}
	f, _ := new(big.Float).SetInt(x).Float64() // exact, then rounded once
	return f
}

// isDecimalLiteral accepts StrDecimalLiteral: [+-] digits [. digits] [e[+-]digits],
// with either side of the dot optional but not both.
func isDecimalLiteral(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// FormatNumber is Number.prototype.toString, which String() and template
// literals use: the shortest digits that read back as f, in exponent form
// from 1e21 up and below 1e-6.
func FormatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0" // -0 too
	}
	abs := math.Abs(f)
	if abs >= 1e21 || abs < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+21 / e-07; JavaScript writes e+21 / e-7.
		mant, exp, _ := strings.Cut(s, "e")
		return mant + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0")
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// NumberJSON is JSON.stringify(f): FormatNumber, with null for NaN and the
// infinities.
func NumberJSON(f float64) string {
	if !IsFinite(f) {
		return "null"
	}
	return FormatNumber(f)
}

// IsFinite is Number.isFinite.
func IsFinite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

// Trunc is Math.trunc, except that -0 becomes 0.
func Trunc(f float64) float64 {
	t := math.Trunc(f)
	if t == 0 {
		return 0
	}
	return t
}

// ToInt32 is the ToInt32 abstract operation, which the bitwise operators
// apply: NaN and the infinities are 0, the rest truncated and wrapped.
func ToInt32(f float64) int32 {
	if !IsFinite(f) {
		return 0
	}
	return int32(uint32(int64(math.Mod(math.Trunc(f), 1<<32))))
}

// ToUint8 is the ToUint8 abstract operation, with which a Uint8Array stores
// a number: NaN and the infinities are 0, the rest truncated and taken
// modulo 256.
func ToUint8(f float64) byte {
	if !IsFinite(f) {
		return 0
	}
	m := math.Mod(math.Trunc(f), 256)
	if m < 0 {
		m += 256
	}
	return byte(m)
}

// ToLength is the ToLength abstract operation: NaN and negatives are 0, the
// rest truncated and capped at 2^53-1.
func ToLength(f float64) float64 {
	if math.IsNaN(f) || f <= 0 {
		return 0
	}
	return math.Min(math.Trunc(f), 1<<53-1)
}
