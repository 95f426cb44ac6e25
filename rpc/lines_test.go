package rpc

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunks delivers its parts one Read at a time, as a pipe may.
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func readAll(t *testing.T, r io.Reader) []string {
	t.Helper()
	l := newLineReader(r)
	var out []string
	for {
		line, err := l.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, string(line))
	}
}

// Lines end as Node's readline (crlfDelay: Infinity) ends them: "\n", "\r"
// or "\r\n", that last one even when its two bytes arrive apart.
func TestLineEndingsAreNodeReadlines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3*readBufferSize+17)
	for name, tc := range map[string]struct {
		parts []string
		want  []string
	}{
		"lf":                  {[]string{"a\nb\n"}, []string{"a", "b"}},
		"raw cr":              {[]string{"a\rb\n"}, []string{"a", "b"}},
		"crlf":                {[]string{"a\r\nb\r\n"}, []string{"a", "b"}},
		"crlf split":          {[]string{"a\r", "\nb\n"}, []string{"a", "b"}},
		"cr cr":               {[]string{"a\r\rb"}, []string{"a", "", "b"}},
		"lf cr":               {[]string{"a\n\rb"}, []string{"a", "", "b"}},
		"unterminated":        {[]string{"a\nb"}, []string{"a", "b"}},
		"long line cr":        {[]string{long + "\r" + "b\n"}, []string{long, "b"}},
		"long line crlf":      {[]string{long, "\r", "\n", "b"}, []string{long, "b"}},
		"long unterminated":   {[]string{"a\n", long}, []string{"a", long}},
		"empty":               {nil, nil},
		"cr at end of input":  {[]string{"a\r"}, []string{"a"}},
		"lf after cr on next": {[]string{"a\r", "\n", "\n"}, []string{"a", ""}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, readAll(t, &chunks{parts: append([]string(nil), tc.parts...)}))
			joined := strings.Join(tc.parts, "")
			assert.Equal(t, tc.want, readAll(t, iotest.OneByteReader(strings.NewReader(joined))), "one byte at a time")
		})
	}
}

// A line ended by a raw CR is answered before anything else arrives: the
// reader does not wait to see whether a "\n" follows.
func TestARawCREndsALineAtOnce(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	_, err := io.WriteString(f.toConn, `{"jsonrpc":"2.0","id":1,"method":"void"}`+"\r"+`{"jsonrpc":"2.0","id":2,"method":"void"}`+"\r")
	require.NoError(t, err)
	got := []string{f.recvRaw(), f.recvRaw()}
	assert.ElementsMatch(t, []string{`{"jsonrpc":"2.0","id":1,"result":null}`, `{"jsonrpc":"2.0","id":2,"result":null}`}, got)
	// The "\n" that completes the second ending is not a line of its own.
	f.send(`{"jsonrpc":"2.0","id":3,"method":"void"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"result":null}`, f.recvRaw())
}
