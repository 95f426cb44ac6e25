package worker

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// BenchmarkJSONStringEscape measures escaping typical command output (1000-
// byte lines) into a JSON string body, the relay's main per-byte cost.
func BenchmarkJSONStringEscape(b *testing.B) {
	var out bytes.Buffer
	for i := 0; out.Len() < 1<<20; i++ {
		fmt.Fprintf(&out, "%09d %s\n", i, strings.Repeat("a", 989))
	}
	p := out.Bytes()
	e := jsonStringWriter{w: io.Discard, buf: make([]byte, 0, 64<<10)}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		for off := 0; off < len(p); off += 16 << 10 {
			_ = e.write(p[off:min(off+16<<10, len(p))])
		}
		_ = e.flush()
	}
}

// BenchmarkJSONStringEscapeControl is the worst case: every byte a control
// character that becomes six bytes of JSON.
func BenchmarkJSONStringEscapeControl(b *testing.B) {
	p := bytes.Repeat([]byte{3}, 1<<20)
	e := jsonStringWriter{w: io.Discard, buf: make([]byte, 0, 64<<10)}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		_ = e.write(p)
		_ = e.flush()
	}
}
