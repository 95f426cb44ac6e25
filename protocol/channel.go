package protocol

import "encoding/base64"

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
	if s == "" {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}
