package output

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

// BenchmarkResultJSON measures writing a relayed result of 1000-byte lines
// (8 MB), with the notifications' escape map ("mapped") and, as before the
// map, searching every byte again ("searched").
func BenchmarkResultJSON(b *testing.B) {
	var out bytes.Buffer
	for i := 0; out.Len() < 8<<20; i++ {
		fmt.Fprintf(&out, "%09d %s\n", i, strings.Repeat("a", 989))
	}
	for _, mapped := range []bool{true, false} {
		b.Run(map[bool]string{true: "mapped", false: "searched"}[mapped], func(b *testing.B) {
			var buf Buffer
			buf.Write(out.Bytes())
			if mapped {
				var c blockCursor
				var scratch []byte
				chunk := &logChunk{stream: "stdout", chunk: buf.take(&c, out.Len()), scratch: &scratch, escapes: &buf.escapes}
				if err := chunk.WriteJSON(io.Discard); err != nil || buf.escapes.dropped {
					b.Fatal("no map", err)
				}
			}
			b.SetBytes(int64(out.Len()))
			for b.Loop() {
				if err := buf.writeJSONString(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
