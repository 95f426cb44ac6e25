// Package jsonstream reads newline-delimited JSON messages of any size, as
// a Paperclip host reads a worker's stdout: strings the caller chooses (a
// large command output) are digested as they stream by instead of being
// held. The end-to-end tests and the bench-compare tool check the worker's
// output with it.
package jsonstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Reader decodes one JSON value per line. Strings at the paths Hash chooses
// are streamed into a digest (a Text) instead of being kept; everything else
// becomes map[string]any, []any, string, json.Number, bool or nil.
type Reader struct {
	br *bufio.Reader
	// Hash chooses the strings to digest by their path (object keys and
	// array indexes from the top); nil keeps every string.
	Hash func(path []string) bool
	// NewDigest makes the digest of a chosen string.
	NewDigest func() hash.Hash64
	// Raw chooses strings to decode into memory the Reader reuses: they
	// come as Bytes, valid until the next call to Next, so that a host
	// reading many output chunks allocates nothing per chunk.
	Raw func(path []string) bool
	str bytes.Buffer // reused for decoding strings
	raw []byte       // Raw strings of the current message
	// scratch gathers a string's decoded escapes for one write (reused).
	scratch []byte
}

// Bytes is a string the Reader decoded into reused memory (see Raw).
type Bytes []byte

// NewReader reads messages from br.
func NewReader(br *bufio.Reader) *Reader { return &Reader{br: br} }

// Text stands for a JSON string the Reader digested instead of keeping.
type Text struct {
	N    int64  // its length in bytes (UTF-8)
	Sum  uint64 // its digest
	Head string // its first bytes, for messages
}

// ErrNotNDJSON reports a value followed by something other than a newline.
var ErrNotNDJSON = errors.New("message not terminated by a newline")

// Next reads one message; the line must end right after the value.
func (r *Reader) Next() (any, error) {
	r.raw = r.raw[:0]
	v, err := r.value(nil)
	if err != nil {
		return nil, err
	}
	c, err := r.br.ReadByte()
	if err != nil {
		return nil, err
	}
	if c != '\n' {
		return nil, fmt.Errorf("%w (got %q)", ErrNotNDJSON, c)
	}
	return v, nil
}

func (r *Reader) skipSpace() (byte, error) {
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, nil
		}
	}
}

func (r *Reader) value(path []string) (any, error) {
	c, err := r.skipSpace()
	if err != nil {
		return nil, err
	}
	switch c {
	case '{':
		obj := map[string]any{}
		c, err := r.skipSpace()
		if err != nil || c == '}' {
			return obj, err
		}
		for {
			if c != '"' {
				return nil, fmt.Errorf("object key: unexpected %q", c)
			}
			var key bytes.Buffer
			if _, err := r.stringTo(&key); err != nil {
				return nil, err
			}
			if c, err = r.skipSpace(); err != nil || c != ':' {
				return nil, fmt.Errorf("after key %q: want ':' (%v)", key.String(), err)
			}
			child := append(path[:len(path):len(path)], key.String())
			v, err := r.value(child)
			if err != nil {
				return nil, err
			}
			obj[key.String()] = v
			if c, err = r.skipSpace(); err != nil {
				return nil, err
			}
			switch c {
			case '}':
				return obj, nil
			case ',':
				if c, err = r.skipSpace(); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("in object: unexpected %q", c)
			}
		}
	case '[':
		arr := []any{}
		if b, err := r.br.Peek(1); err == nil && b[0] == ']' {
			_, _ = r.br.ReadByte()
			return arr, nil
		}
		for {
			v, err := r.value(append(path[:len(path):len(path)], strconv.Itoa(len(arr))))
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			c, err := r.skipSpace()
			if err != nil {
				return nil, err
			}
			if c == ']' {
				return arr, nil
			}
			if c != ',' {
				return nil, fmt.Errorf("in array: unexpected %q", c)
			}
		}
	case '"':
		if r.Hash != nil && r.Hash(path) {
			h := r.NewDigest()
			head := &prefixWriter{max: 200}
			n, err := r.stringTo(io.MultiWriter(h, head))
			if err != nil {
				return nil, err
			}
			return Text{N: n, Sum: h.Sum64(), Head: head.buf.String()}, nil
		}
		if r.Raw != nil && r.Raw(path) {
			w := appendWriter{b: &r.raw}
			start := len(r.raw)
			_, err := r.stringTo(w)
			return Bytes(r.raw[start:len(r.raw):len(r.raw)]), err
		}
		r.str.Reset()
		_, err := r.stringTo(&r.str)
		return r.str.String(), err
	case 't', 'f', 'n':
		word := map[byte]string{'t': "rue", 'f': "alse", 'n': "ull"}[c]
		rest := make([]byte, len(word))
		if _, err := io.ReadFull(r.br, rest); err != nil || string(rest) != word {
			return nil, fmt.Errorf("bad literal starting with %q", c)
		}
		return map[byte]any{'t': true, 'f': false, 'n': nil}[c], nil
	default:
		num := []byte{c}
		for {
			b, err := r.br.Peek(1)
			if err != nil || !strings.ContainsRune("+-0123456789.eE", rune(b[0])) {
				break
			}
			num = append(num, b[0])
			_, _ = r.br.ReadByte()
		}
		if !json.Valid(num) {
			return nil, fmt.Errorf("bad number %q", num)
		}
		return json.Number(num), nil
	}
}

// stringTo decodes the rest of a JSON string (the opening quote is read)
// into w and returns the decoded length. It works on the buffered window:
// runs without escapes go to w as they are, and escapes are decoded into a
// reused scratch buffer that reaches w in large writes, so a string of
// control bytes (six bytes of JSON each) costs no call per byte. An escape
// cut by the window's end is decoded by escapeTo, which reads on.
func (r *Reader) stringTo(w io.Writer) (int64, error) {
	var n int64
	out := r.scratch[:0]
	defer func() { r.scratch = out[:0] }()
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		_, err := w.Write(out)
		n += int64(len(out))
		out = out[:0]
		return err
	}
	for {
		if _, err := r.br.Peek(1); err != nil {
			return n, errors.Join(err, flush())
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		i := 0
	window:
		for i < len(buf) {
			switch buf[i] {
			case '"':
				_, _ = r.br.Discard(i + 1)
				return n, flush()
			case '\\':
				if i+6 <= len(buf) && buf[i+1] == 'u' && buf[i+2] == '0' && buf[i+3] == '0' {
					// \u00XX, the escape of a control byte: the most common
					// \u escape by far, decoded in place.
					if hi, lo := hexValue[buf[i+4]], hexValue[buf[i+5]]; hi|lo < 16 {
						if c := hi<<4 | lo; c < utf8.RuneSelf {
							out = append(out, c)
						} else {
							out = utf8.AppendRune(out, rune(c))
						}
						i += 6
						if len(out) >= scratchSize {
							if err := flush(); err != nil {
								return n, err
							}
						}
						continue
					}
				}
				dec, used, ok := decodeEscape(buf[i:])
				if !ok {
					break window // cut by the window's end, or bad: escapeTo reports it
				}
				out = append(out, dec.b[:dec.n]...)
				i += used
				if len(out) >= scratchSize {
					if err := flush(); err != nil {
						return n, err
					}
				}
				continue
			}
			// A run up to the next escape or the closing quote; the escape
			// bounds the search for the quote, so each byte is scanned once
			// however many escapes the window holds.
			run := buf[i:]
			if j := bytes.IndexByte(run, '\\'); j >= 0 {
				run = run[:j]
			}
			if j := bytes.IndexByte(run, '"'); j >= 0 {
				run = run[:j]
			}
			if len(out)+len(run) <= scratchSize {
				out = append(out, run...)
			} else {
				if err := flush(); err != nil {
					return n, err
				}
				if _, err := w.Write(run); err != nil {
					return n, err
				}
				n += int64(len(run))
			}
			i += len(run)
		}
		_, _ = r.br.Discard(i)
		if i < len(buf) {
			// An escape the window does not hold whole (or a bad one).
			if err := flush(); err != nil {
				return n, err
			}
			_, _ = r.br.Discard(1) // the backslash
			m, err := r.escapeTo(w)
			n += m
			if err != nil {
				return n, err
			}
		}
	}
}

// scratchSize is how many decoded bytes stringTo gathers before writing.
const scratchSize = 64 << 10

// decoded is one escape's decoded bytes.
type decoded struct {
	b [utf8.UTFMax]byte
	n int
}

// decodeEscape decodes the escape at the start of p (p[0] is the
// backslash) and returns its bytes and length in p; ok is false when p
// does not hold the escape whole (a surrogate's possible partner included)
// or it is bad, for escapeTo to decide.
func decodeEscape(p []byte) (d decoded, used int, ok bool) {
	if len(p) < 2 {
		return d, 0, false
	}
	switch e := p[1]; e {
	case '"', '\\', '/':
		d.b[0] = e
	case 'b':
		d.b[0] = '\b'
	case 'f':
		d.b[0] = '\f'
	case 'n':
		d.b[0] = '\n'
	case 'r':
		d.b[0] = '\r'
	case 't':
		d.b[0] = '\t'
	case 'u':
		if len(p) < 6 {
			return d, 0, false
		}
		rn, valid := parseHex4(p[2:])
		if !valid {
			return d, 0, false
		}
		used = 6
		if utf16.IsSurrogate(rn) {
			if len(p) < 12 {
				return d, 0, false
			}
			rn, used = surrogate(rn, p[6:12])
		}
		d.n = utf8.EncodeRune(d.b[:], rn)
		return d, used, true
	default:
		return d, 0, false
	}
	d.n = 1
	return d, 2, true
}

// surrogate decodes the half hi of a surrogate pair followed by ahead (the
// next six bytes) as encoding/json does: a valid pair is one rune (and
// takes the six bytes), anything else turns hi into U+FFFD.
func surrogate(hi rune, ahead []byte) (rune, int) {
	if len(ahead) == 6 && ahead[0] == '\\' && ahead[1] == 'u' {
		if lo, ok := parseHex4(ahead[2:]); ok {
			if dec := utf16.DecodeRune(hi, lo); dec != utf8.RuneError {
				return dec, 12
			}
		}
	}
	return utf8.RuneError, 6
}

// escapeTo decodes one escape (the backslash is read), reading as far as
// it needs, into w and returns the decoded length.
func (r *Reader) escapeTo(w io.Writer) (int64, error) {
	e, err := r.br.ReadByte()
	if err != nil {
		return 0, err
	}
	var one [utf8.UTFMax]byte
	var out []byte
	switch e {
	case '"', '\\', '/':
		out = append(one[:0], e)
	case 'b':
		out = append(one[:0], '\b')
	case 'f':
		out = append(one[:0], '\f')
	case 'n':
		out = append(one[:0], '\n')
	case 'r':
		out = append(one[:0], '\r')
	case 't':
		out = append(one[:0], '\t')
	case 'u':
		rn, err := r.hex4()
		if err != nil {
			return 0, err
		}
		if utf16.IsSurrogate(rn) {
			ahead, _ := r.br.Peek(6)
			var used int
			rn, used = surrogate(rn, ahead)
			_, _ = r.br.Discard(used - 6)
		}
		out = utf8.AppendRune(one[:0], rn)
	default:
		return 0, fmt.Errorf("bad escape \\%c", e)
	}
	_, err = w.Write(out)
	return int64(len(out)), err
}

func (r *Reader) hex4() (rune, error) {
	b, err := r.br.Peek(4)
	if err != nil {
		return 0, err
	}
	v, ok := parseHex4(b)
	if !ok {
		return 0, fmt.Errorf("bad \\u escape %q", b)
	}
	_, _ = r.br.Discard(4)
	return v, nil
}

// hexValue is each byte's value as a hex digit, 0xff for bytes that are not.
var hexValue = func() (v [256]byte) {
	for i := range v {
		v[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		v[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		v[c], v[c-'a'+'A'] = c-'a'+10, c-'a'+10
	}
	return v
}()

// parseHex4 reads the four hex digits of a \u escape.
func parseHex4(b []byte) (rune, bool) {
	var v rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// appendWriter appends to a slice.
type appendWriter struct{ b *[]byte }

func (w appendWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

type prefixWriter struct {
	buf bytes.Buffer
	max int
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if room := p.max - p.buf.Len(); room > 0 {
		p.buf.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}
