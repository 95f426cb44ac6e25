package js

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The expected values in this package's tests are what Node 20 gives for the
// same input.

// decoded is the value Decode makes of a JSON text that must be valid.
func decoded(t *testing.T, text string) any {
	t.Helper()
	v, ok := Decode([]byte(text))
	if !ok {
		t.Fatalf("Decode(%s) failed", text)
	}
	return v
}

func TestNumberCoercesAsNumber(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want float64
	}{
		{`12`, 12}, {`"12"`, 12}, {`" 12 "`, 12}, {`""`, 0}, {`"  "`, 0}, {`true`, 1}, {`false`, 0},
		{`"0x10"`, 16}, {`"1e3"`, 1000}, {`".5"`, 0.5}, {`"5."`, 5}, {`"-7.5"`, -7.5}, {`[]`, 0}, {`[42]`, 42},
		{`["8"]`, 8}, {`[[" 9 "]]`, 9}, {`[null]`, 0}, {`[1e400]`, math.Inf(1)}, {`[[]]`, 0}, {`null`, 0}, {`"Infinity"`, math.Inf(1)}, {`"-Infinity"`, math.Inf(-1)},
		{`"+Infinity"`, math.Inf(1)}, {`"\u00a01\ufeff"`, 1}, {`1e400`, math.Inf(1)}, {`-1e400`, math.Inf(-1)},
		{`1e-400`, 0}, {`"1e400"`, math.Inf(1)}, {`"-1e400"`, math.Inf(-1)},
	} {
		assert.Equal(t, tt.want, Number(decoded(t, tt.in)), tt.in)
	}
	for _, nan := range []string{`"12px"`, `{}`, `[1,2]`, `"0x"`, `"1e"`, `"."`, `"-0x10"`, `"1_000"`, `"infinity"`, `"e5"`, `"1e+"`, `[true]`, `[[1,2]]`} {
		assert.True(t, math.IsNaN(Number(decoded(t, nan))), nan)
	}
	assert.Equal(t, 2.5, Number(2.5))
}

// 0x, 0o and 0b strings of any length are numbers: the integer rounded once
// to the nearest double, ties to even.
func TestStringToNumberReadsRadixLiteralsOfAnyLength(t *testing.T) {
	t.Parallel()
	two64 := math.Ldexp(1, 64)
	for _, tt := range []struct {
		in   string
		want float64
	}{
		{"0x1F", 31}, {"0o17", 15}, {"0b101", 5}, {"0X00000000000000000000000001", 1},
		{"0xFFFFFFFFFFFFFFFF", two64},                   // 2^64-1, the largest 64-bit parse, rounds up
		{"0x20000000000001", math.Ldexp(1, 53)},         // 2^53+1: a tie, to even
		{"0x20000000000003", math.Ldexp(1, 53) + 4},     // 2^53+3: a tie, to even
		{"0x10000000000000000", two64},                  // 2^64: just past 64 bits
		{"0x10000000000000001", two64},                  // 2^64+1
		{"0x10000000000000800", two64},                  // 2^64+2^11: a tie, to even (down)
		{"0x10000000000000801", two64 + 4096},           // just past the tie
		{"0x10000000000001800", two64 + 8192},           // 2^64+3*2^11: a tie, to even (up)
		{"0x1FFFFFFFFFFFFFFFF", math.Ldexp(1, 65)},      // 2^65-1
		{"0x1FFFFFFFFFFFFFFFFF", 590295810358705700000}, // 2^69-1
		{"0b1" + strings.Repeat("0", 64), two64},
		{"0o" + strings.Repeat("7", 30), math.Ldexp(1, 90)},
		{"0x" + strings.Repeat("f", 300), math.Inf(1)}, // past the largest double
	} {
		assert.Equal(t, tt.want, StringToNumber(tt.in), tt.in)
	}
	for _, nan := range []string{"0x1FFFFFFFFFFFFFFFFFzz", "0x1FFFFFFFFFFFFFFFFF_F", "0x1_0", "0x+1", "0x-1", "0b12", "0o8"} {
		assert.True(t, math.IsNaN(StringToNumber(nan)), nan)
	}
}

func TestFormatNumberAndNumberJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in                float64
		format, stringify string
	}{
		{0, "0", "0"}, {math.Copysign(0, -1), "0", "0"}, {1e21, "1e+21", "1e+21"}, {1e-7, "1e-7", "1e-7"},
		{-1e-7, "-1e-7", "-1e-7"}, {1e-6, "0.000001", "0.000001"}, {300000, "300000", "300000"},
		{2.5, "2.5", "2.5"}, {-1.5, "-1.5", "-1.5"}, {123456789012345680000, "123456789012345680000", "123456789012345680000"},
		{math.MaxFloat64, "1.7976931348623157e+308", "1.7976931348623157e+308"}, {5e-324, "5e-324", "5e-324"},
		{0.30000000000000004, "0.30000000000000004", "0.30000000000000004"},
		{math.NaN(), "NaN", "null"}, {math.Inf(1), "Infinity", "null"}, {math.Inf(-1), "-Infinity", "null"},
	} {
		assert.Equal(t, tt.format, FormatNumber(tt.in), "String(%v)", tt.in)
		assert.Equal(t, tt.stringify, NumberJSON(tt.in), "JSON.stringify(%v)", tt.in)
	}
}

func TestIntegerConversions(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		in     float64
		trunc  float64
		int32  int32
		uint8  byte
		length float64
	}{
		{384, 384, 384, 128, 384},
		{384.9, 384, 384, 128, 384},
		{-1, -1, -1, 255, 0},
		{-0.5, 0, 0, 0, 0},
		{4294967296 + 420, 4294967296 + 420, 420, 164, 4294967296 + 420},
		{1e20, 1e20, 1661992960, 0, 1<<53 - 1},
		{256.7, 256, 256, 0, 256},
		{-300, -300, -300, 212, 0},
		{nan, nan, 0, 0, 0},
		{inf, inf, 0, 0, 1<<53 - 1},
		{-inf, -inf, 0, 0, 0},
	} {
		if math.IsNaN(tt.trunc) {
			assert.True(t, math.IsNaN(Trunc(tt.in)))
		} else {
			assert.Equal(t, tt.trunc, Trunc(tt.in), "Math.trunc(%v)", tt.in)
		}
		assert.False(t, math.Signbit(Trunc(-0.5)), "no -0")
		assert.Equal(t, tt.int32, ToInt32(tt.in), "ToInt32(%v)", tt.in)
		assert.Equal(t, tt.uint8, ToUint8(tt.in), "ToUint8(%v)", tt.in)
		assert.Equal(t, tt.length, ToLength(tt.in), "ToLength(%v)", tt.in)
	}
	assert.True(t, IsFinite(1e308))
	assert.False(t, IsFinite(nan))
	assert.False(t, IsFinite(-inf))
}

func TestNumberOfAJSONNumberOutOfRange(t *testing.T) {
	t.Parallel()
	assert.Equal(t, math.Inf(-1), Number(json.Number("-1e999")))
}
