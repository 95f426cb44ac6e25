package daytona

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// refDemux is the specification: scan the whole input, a run of three equal
// marker bytes switches the stream, everything else is payload of the
// current stream (stdout before any marker).
func refDemux(in []byte) (stdout, stderr []byte) {
	out := [2][]byte{}
	cur := 0
	for i := 0; i < len(in); {
		b := in[i]
		if (b == 1 || b == 2) && i+3 <= len(in) && in[i+1] == b && in[i+2] == b {
			cur = int(b) - 1
			i += 3
			continue
		}
		out[cur] = append(out[cur], b)
		i++
	}
	return out[0], out[1]
}

var demuxCases = []string{
	"",
	"plain text, no markers",
	"\x01\x01\x01hello\n",
	"\x01\x01\x01out1\n\x02\x02\x02err1\n\x01\x01\x01out2\n",
	"before\x02\x02\x02after",
	"\x01\x01\x01\x02\x02\x02",
	"\x01\x01\x01\x01",                                     // marker then a lone 0x01 payload byte
	"\x01\x01\x01\x01\x01\x01x",                            // two markers back to back
	"\x01\x01x\x01",                                        // near-markers are payload
	"a\x02\x02b\x02\x02\x02c\x02",                          // partial then real marker
	"\x01\x01\x02\x02\x02z",                                // 0x01 run cut by a stderr marker
	"\x02\x02\x02tail\x01\x01",                             // stream ends inside a would-be marker
	"\x02\x02\x02\x01",                                     // ends with one marker byte
	"\x01\x01\x01\x00\x01\x02\x03\xff",                     // binary payload
	"\x02\x02\x02\xe2\x82\xac\x01\x01\x01\xf0\x9f\x98\x80", // UTF-8 split across frames
}

func demuxFrames(t *testing.T, frames [][]byte) (stdout, stderr []byte) {
	t.Helper()
	var o, e bytes.Buffer
	d := NewDemuxer(&o, &e)
	for _, f := range frames {
		if n, err := d.Write(f); err != nil || n != len(f) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	so, se := d.Written()
	if so != int64(o.Len()) || se != int64(e.Len()) {
		t.Errorf("Written = %d,%d; buffers hold %d,%d", so, se, o.Len(), e.Len())
	}
	return o.Bytes(), e.Bytes()
}

// Every case is cut into three frames at every pair of offsets (so every
// marker is split at every position, alone and combined with other cuts),
// and also fed byte by byte.
func TestDemuxerEverySplit(t *testing.T) {
	t.Parallel()
	for _, tc := range demuxCases {
		in := []byte(tc)
		wantOut, wantErr := refDemux(in)
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				gotOut, gotErr := demuxFrames(t, [][]byte{in[:i], in[i:j], in[j:]})
				if !bytes.Equal(gotOut, wantOut) || !bytes.Equal(gotErr, wantErr) {
					t.Fatalf("%q split at %d,%d: stdout %q stderr %q; want %q %q", tc, i, j, gotOut, gotErr, wantOut, wantErr)
				}
			}
		}
		var single [][]byte
		for k := range in {
			single = append(single, in[k:k+1])
		}
		gotOut, gotErr := demuxFrames(t, single)
		if !bytes.Equal(gotOut, wantOut) || !bytes.Equal(gotErr, wantErr) {
			t.Fatalf("%q byte by byte: stdout %q stderr %q", tc, gotOut, gotErr)
		}
	}
}

// Random marker-dense streams, cut at random offsets, against the reference.
func TestDemuxerRandomStreams(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x01, 0x02, 'a', '\n'}
	for iter := range 2000 {
		in := make([]byte, rng.IntN(64))
		for k := range in {
			in[k] = alphabet[rng.IntN(len(alphabet))]
		}
		var frames [][]byte
		for rest := in; len(rest) > 0; {
			n := 1 + rng.IntN(len(rest))
			frames = append(frames, rest[:n])
			rest = rest[n:]
		}
		wantOut, wantErr := refDemux(in)
		gotOut, gotErr := demuxFrames(t, frames)
		if !bytes.Equal(gotOut, wantOut) || !bytes.Equal(gotErr, wantErr) {
			t.Fatalf("iteration %d: %q in frames %q: got %q/%q want %q/%q", iter, in, frames, gotOut, gotErr, wantOut, wantErr)
		}
	}
}

func TestDemuxerNilWritersAndErrors(t *testing.T) {
	t.Parallel()
	d := NewDemuxer(nil, nil)
	if _, err := d.Write([]byte("\x01\x01\x01abc\x02\x02\x02de")); err != nil {
		t.Fatal(err)
	}
	if o, e := d.Written(); o != 3 || e != 2 {
		t.Errorf("Written = %d,%d", o, e)
	}
	boom := errors.New("boom")
	d = NewDemuxer(failWriter{boom}, nil)
	if _, err := d.Write([]byte("\x01\x01\x01abc")); !errors.Is(err, boom) {
		t.Errorf("err = %v", err)
	}
}

func TestSplitOutput(t *testing.T) {
	t.Parallel()
	o, e := splitOutput("\x01\x01\x01out\n\x02\x02\x02err\n")
	if o != "out\n" || e != "err\n" {
		t.Errorf("splitOutput = %q, %q", o, e)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func BenchmarkDemuxer(b *testing.B) {
	var line bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&line, "\x01\x01\x01stdout line %d with some text\n\x02\x02\x02stderr line %d\n", i, i)
	}
	data := line.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDemuxer(nil, nil)
		for off := 0; off < len(data); off += 1024 {
			_, _ = d.Write(data[off:min(off+1024, len(data))])
		}
		_ = d.Flush()
	}
}
