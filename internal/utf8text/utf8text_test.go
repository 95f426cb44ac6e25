package utf8text

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// The expectations are what Node 20's new TextDecoder().decode gives.
func TestReplace(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", "héllo € 😀"},
		{"\xef\xbf\xbd", "\ufffd"}, // a real U+FFFD stays one
		{"A\xe2\x82xB", "A\ufffdxB"},
		{"I\xf0\x9f\x98J", "I\ufffdJ"},
		{"end\xe2\x82", "end\ufffd"},
		{"C\xed\xa0\x80D", "C\ufffd\ufffd\ufffdD"},
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},
		{"\xe0\xa0", "\ufffd"},
		{"\xf0\x80\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xf0\x90\x80", "\ufffd"},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xf4\x8f\xbf", "\ufffd"},
		{"\xc0\xaf", "\ufffd\ufffd"},
		{"\xc1\xbf", "\ufffd\ufffd"},
		{"\xf5\x80\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xff\xfe", "\ufffd\ufffd"},
		{"\x80\xbf", "\ufffd\ufffd"},
		{"\xe2\x82\xe2\x82\xac", "\ufffd€"},
		{"\xf1\x80\x80\xe1\x80\xc2", "\ufffd\ufffd\ufffd"},
		{"\xdf", "\ufffd"},
	} {
		if got := string(Replace([]byte(tt.in))); got != tt.want {
			t.Errorf("Replace(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// IllFormed agrees with an independent reading of the standard: the maximal
// subpart is the longest prefix that utf8.FullRune calls an unfinished
// valid start, else the lead byte alone. Every one-, two- and three-byte
// string is checked, each also followed by a fourth byte of each kind.
func TestIllFormedExhaustive(t *testing.T) {
	fourths := []byte{0x00, 0x41, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xe0, 0xf0, 0xff}
	check := func(p []byte) {
		if r, size := utf8.DecodeRune(p); r != utf8.RuneError || size > 1 {
			return
		}
		want, wantCut := 1, false
		for k := min(3, len(p)); k >= 1; k-- {
			if !utf8.FullRune(p[:k]) {
				want, wantCut = k, k == len(p)
				break
			}
		}
		if n, cut := IllFormed(p); n != want || cut != wantCut {
			t.Fatalf("IllFormed(%q) = %d, %v, want %d, %v", p, n, cut, want, wantCut)
		}
	}
	for a := 0x80; a < 0x100; a++ {
		check([]byte{byte(a)})
		for b := range 0x100 {
			check([]byte{byte(a), byte(b)})
			for c := range 0x100 {
				p := []byte{byte(a), byte(b), byte(c)}
				check(p)
				if bytes.IndexByte(fourths, p[2]) >= 0 {
					for _, d := range fourths {
						check(append(p, d))
					}
				}
			}
		}
	}
}

func TestReplaceValidIsNotCopied(t *testing.T) {
	p := []byte("héllo")
	if q := Replace(p); &q[0] != &p[0] {
		t.Error("valid input was copied")
	}
}
