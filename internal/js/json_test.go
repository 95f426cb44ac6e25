package js

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestObjectKeepsJavaScriptsMemberOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ text, keys string }{
		{`{}`, ``},
		{`{"b":1,"a":2}`, `b a`},
		{`{"b":1,"2":2,"a":3,"1":4,"b":5,"01":6,"4294967295":7,"4294967294":8}`, `1 2 4294967294 b a 01 4294967295`},
		{`{"10":1,"9":2,"-1":3,"0":4,"+1":5," 1":6}`, `0 9 10 -1 +1  1`},
	} {
		obj, ok := decoded(t, tt.text).(*Object)
		require.True(t, ok, tt.text)
		got := ""
		for i, k := range obj.Keys() {
			if i > 0 {
				got += " "
			}
			got += k
		}
		assert.Equal(t, tt.keys, got, tt.text)
	}
	// A repeated member keeps its first place and takes its last value.
	obj := decoded(t, `{"a":1,"b":2,"a":3}`).(*Object)
	v, ok := obj.Get("a")
	assert.True(t, ok)
	assert.Equal(t, "3", Stringify(v))
	_, ok = obj.Get("c")
	assert.False(t, ok)

	built := NewObject()
	for _, k := range []string{"x", "7", "y", "3", "x"} {
		built.Set(k, k)
	}
	assert.Equal(t, []string{"3", "7", "x", "y"}, built.Keys())
}

func TestIsArrayIndex(t *testing.T) {
	t.Parallel()
	for k, want := range map[string]bool{
		"0": true, "17": true, "4294967294": true, "4294967295": false, "99999999999": false,
		"01": false, "": false, "-1": false, "+1": false, "1.0": false, " 1": false, "1e3": false,
	} {
		assert.Equal(t, want, IsArrayIndex(k), "%q", k)
	}
}

func TestDecodeRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	for _, text := range []string{``, `  `, `{`, `[1,]`, `{"a"}`, `nul`} {
		_, ok := Decode([]byte(text))
		assert.False(t, ok, "%q", text)
	}
}

func TestStringifyWritesAsJSONStringify(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ text, compact, indented string }{
		{
			`{"b":1,"2":2,"a":3,"1":4,"b":5,"01":6,"4294967295":7,"4294967294":8}`,
			`{"1":4,"2":2,"4294967294":8,"b":5,"a":3,"01":6,"4294967295":7}`,
			"{\n  \"1\": 4,\n  \"2\": 2,\n  \"4294967294\": 8,\n  \"b\": 5,\n  \"a\": 3,\n  \"01\": 6,\n  \"4294967295\": 7\n}",
		},
		{
			`[1.50,1e2,-0,1e400,"x\u2028<>",true,null,{}]`,
			"[1.5,100,0,null,\"x\u2028<>\",true,null,{}]",
			"[\n  1.5,\n  100,\n  0,\n  null,\n  \"x\u2028<>\",\n  true,\n  null,\n  {}\n]",
		},
		{` {"a" : [ ] } `, `{"a":[]}`, "{\n  \"a\": []\n}"},
		{`{"a":{"b":[1,{"c":null}]}}`, `{"a":{"b":[1,{"c":null}]}}`,
			"{\n  \"a\": {\n    \"b\": [\n      1,\n      {\n        \"c\": null\n      }\n    ]\n  }\n}"},
		{`"s"`, `"s"`, `"s"`},
	} {
		v := decoded(t, tt.text)
		assert.Equal(t, tt.compact, Stringify(v), tt.text)
		assert.Equal(t, tt.indented, StringifyIndent(v), tt.text)
		got, ok := Restringify([]byte(tt.text))
		assert.True(t, ok, tt.text)
		assert.Equal(t, tt.compact, got, tt.text)
	}
	assert.Equal(t, "2.5", Stringify(2.5))
	assert.Equal(t, "null", Stringify(struct{}{}), "a value Decode never makes")
}

func TestRestringifyRefusesASecondValue(t *testing.T) {
	t.Parallel()
	for _, text := range []string{``, `{`, `1 2`, `{} []`} {
		_, ok := Restringify([]byte(text))
		assert.False(t, ok, "%q", text)
	}
}

// For an invalid byte, the expectation is the quoting of the string Node
// decodes from it.
func TestQuoteQuotesAsJSONStringify(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":             `""`,
		`a"b\c`:        `"a\"b\\c"`,
		"\b\f\n\r\t":   `"\b\f\n\r\t"`,
		"\x00\x1f\x7f": `"\u0000\u001f` + "\x7f\"",
		"<&>":          `"<&>"`,
		"ü€😀":          `"ü€😀"`,
		"\u2028\u2029": "\"\u2028\u2029\"",
		"bad\xffbyte":  "\"bad\uFFFDbyte\"",
		"cut\xe2\x82":  "\"cut\uFFFD\uFFFD\"",
	} {
		assert.Equal(t, want, Quote(in), "%q", in)
	}
}
