package protocol

import (
	"encoding/base64"
	"strings"
)

// EncodeChannelBytes encodes duplex-channel bytes in their wire form:
// standard base64 with padding.
func EncodeChannelBytes(b []byte) string {
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeChannelBytes decodes the wire form of duplex-channel bytes. It rejects
// exactly what the SDK's decodeChannelBytes rejects: the empty string and any
// value that does not re-encode to itself (missing padding, URL-safe letters,
// whitespace, line breaks, stray characters, non-zero padding bits).
func DecodeChannelBytes(s string) ([]byte, bool) {
	// Only the canonical form re-encodes to itself: whole four-character
	// groups (padded), no line breaks (which the decoder skips), zero
	// padding bits (Strict). Checking that is cheaper than re-encoding a
	// write of a quarter megabyte.
	if s == "" || len(s)%4 != 0 || strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, false
	}
	return b, true
}
