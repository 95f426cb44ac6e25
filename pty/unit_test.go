package pty

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLoginLaunchLinesAndHomeCommand(t *testing.T) {
	t.Parallel()
	home := "/tmp/paperclip-adapter-login/0f0e0d0c-0b0a-4909-8807-060504030201"
	for key, want := range map[string]string{
		"claude": "exec claude setup-token",
		"codex":  "exec env CODEX_HOME='" + home + "' codex login --device-auth",
		"grok":   "exec env GROK_HOME='" + home + "' grok login --device-auth",
	} {
		if got := LaunchLine(key, home); got != want {
			t.Errorf("LaunchLine(%s) = %q, want %q", key, got, want)
		}
	}
	want := `if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi && ` +
		`if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi && ` +
		`if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi && ` +
		`if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi && ` +
		`mkdir -p '` + home + `'`
	if got := HomeCommand(home); got != want {
		t.Errorf("HomeCommand = %q\nwant          %q", got, want)
	}
	if got := posixQuote(`a'b`); got != `'a'\''b'` {
		t.Errorf("posixQuote = %s", got)
	}
	if got := posixQuote(`$(id)`); got != `'$(id)'` {
		t.Errorf("posixQuote = %s", got)
	}
}

func TestValidateLogin(t *testing.T) {
	t.Parallel()
	good := "/tmp/paperclip-adapter-login/0f0e0d0c-0b0a-4909-8807-060504030201"
	for _, key := range []string{"claude", "codex", "grok"} {
		if err := ValidateLogin(key, good); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	for _, tt := range []struct{ key, home string }{
		{"gemini", good},
		{"", good},
		{"Claude", good},
		{"claude ", good},
		{"claude", good + "/"},
		{"claude", good + "/../etc"},
		{"claude", "/tmp/paperclip-adapter-login/../../etc"},
		{"claude", strings.ToUpper(good)},
		{"claude", "/tmp/paperclip-adapter-login/0F0E0D0C-0B0A-4909-8807-060504030201"},
		{"claude", "/tmp/paperclip-adapter-login/0f0e0d0c-0b0a-4909-8807-06050403020"},
		{"claude", "tmp/paperclip-adapter-login/0f0e0d0c-0b0a-4909-8807-060504030201"},
		{"claude", good + "\n"},
		{"claude", good + "'; rm -rf ~; '"},
		{"claude", ""},
	} {
		if err := ValidateLogin(tt.key, tt.home); !errors.Is(err, ErrDescriptorRejected) || err.Error() != "LOGIN_PTY_DESCRIPTOR_REJECTED" {
			t.Errorf("ValidateLogin(%q, %q) = %v", tt.key, tt.home, err)
		}
	}
}

func TestLaunchWrapperQuotesEveryArgument(t *testing.T) {
	t.Parallel()
	uid := "11111111-2222-4333-8444-555555555555"
	got, err := LaunchWrapper([]string{"node", "/opt/bridge.js", "--stdio", "o'clock", "$(id) `x` ; rm -rf ~", ""}, DiagnosticsPath(uid), uid)
	if err != nil {
		t.Fatal(err)
	}
	want := `exec 2>'/tmp/paperclip-duplex-` + uid + `.log'; stty raw -echo; printf '\033]%s\007' 'paperclip-duplex-ready;` + uid + `'; ` +
		`exec 'node' '/opt/bridge.js' '--stdio' 'o'"'"'clock' '$(id) ` + "`x`" + ` ; rm -rf ~' ''; exit 127`
	if got != want {
		t.Errorf("wrapper\n got %s\nwant %s", got, want)
	}
	// The echo of the typed line never contains the marker the printf makes.
	if bytes.Contains([]byte(got), readyMarker(uid)) {
		t.Error("the wrapper line contains its own ready marker")
	}
	if _, err := LaunchWrapper(nil, "/tmp/x", uid); err != ErrEmptyCommand || err.Error() != "The duplex channel launch command needs at least one argument." {
		t.Errorf("empty argv: %v", err)
	}
	for _, bad := range []string{"a\rb", "a\nb", "\x00", "tab\there", "\x7f", "\x1b[A"} {
		if _, err := LaunchWrapper([]string{"cat", bad}, "/tmp/x", uid); err == nil || !strings.Contains(err.Error(), "argument 1 holds the control character") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := LaunchWrapper([]string{"cat", strings.Repeat("x", 4000)}, "/tmp/x", uid); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long argv: %v", err)
	}
	// Non-ASCII text is fine: it is typed as it is.
	if _, err := LaunchWrapper([]string{"echo", "héllo €"}, "/tmp/x", uid); err != nil {
		t.Error(err)
	}
}

func TestTextDecoderMatchesTextDecoder(t *testing.T) {
	t.Parallel()
	// Expected values are what Node's TextDecoder("utf-8") produces.
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"plain", "plain"},
		{"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", "héllo € 😀"},
		{"\xff", "\uFFFD"},
		{"a\xe2\x82b", "a\uFFFDb"},          // one maximal subpart → one U+FFFD
		{"\xe2\x82\xe2\x82\xac", "\uFFFD€"}, // truncated, then whole
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x80\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xe0\xa0", "\uFFFD"}, // cut off at the very end
		{"\xf1\x80\x80", "\uFFFD"},
		// A byte-order mark is dropped only as the stream's first character.
		{"\xef\xbb\xbfabc", "abc"},
		{"\xef\xbb\xbf\xef\xbb\xbf", "\ufeff"},
		{"a\xef\xbb\xbf", "a\ufeff"},
		{"\xff\xef\xbb\xbf", "\uFFFD\ufeff"},
		{"\xef\xbb", "\uFFFD"},
	} {
		var d textDecoder
		if got := d.decode([]byte(tt.in), true); got != tt.want {
			t.Errorf("decode(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// Byte by byte, streaming, gives the same text.
		var d2 textDecoder
		var b strings.Builder
		for i := 0; i < len(tt.in); i++ {
			b.WriteString(d2.decode([]byte{tt.in[i]}, false))
		}
		b.WriteString(d2.decode(nil, true))
		if b.String() != tt.want {
			t.Errorf("streamed decode(%q) = %q, want %q", tt.in, b.String(), tt.want)
		}
	}
	// Valid text cut anywhere comes out whole, with no replacement characters.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aé€😀\n\x1b[0m")
	for range 200 {
		var src strings.Builder
		for range rng.IntN(200) {
			src.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		in := []byte(src.String())
		var d textDecoder
		var out strings.Builder
		for len(in) > 0 {
			n := rng.IntN(min(len(in), 7) + 1)
			piece := d.decode(in[:n], false)
			if !utf8.ValidString(piece) || strings.ContainsRune(piece, utf8.RuneError) {
				t.Fatalf("piece %q of %q", piece, src.String())
			}
			out.WriteString(piece)
			in = in[n:]
		}
		out.WriteString(d.decode(nil, true))
		if out.String() != src.String() {
			t.Fatalf("got %q, want %q", out.String(), src.String())
		}
	}
}

func TestLaunchFilterDropsThePreambleOnly(t *testing.T) {
	t.Parallel()
	uid := "11111111-2222-4333-8444-555555555555"
	marker := readyMarker(uid)
	wrapper, _ := LaunchWrapper([]string{"cat"}, DiagnosticsPath(uid), uid)
	stream := append([]byte("motd\r\n$ "+wrapper+"\r\n"), marker...)
	stream = append(stream, "\x00\x01payload\xff"...)
	for cut := 1; cut < len(stream); cut += 3 {
		o := newOutbox(1 << 20)
		f := newLaunchFilter(marker, o)
		for _, piece := range [][]byte{stream[:cut], stream[cut:]} {
			if n, err := f.Write(piece); err != nil || n != len(piece) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		select {
		case <-f.ready:
		default:
			t.Fatalf("cut %d: marker not found", cut)
		}
		b, _ := o.take(nil)
		if string(b) != "\x00\x01payload\xff" {
			t.Fatalf("cut %d: passed %q", cut, b)
		}
	}
}

func TestOutboxBlocksAtItsLimit(t *testing.T) {
	t.Parallel()
	o := newOutbox(10)
	if _, err := o.Write(make([]byte, 12)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := o.Write([]byte("x"))
		wrote <- err
	}()
	<-o.full // the second Write waits: the outbox holds its limit
	select {
	case err := <-wrote:
		t.Fatalf("Write past the limit returned: %v", err)
	default:
	}
	b, res := o.take(nil)
	if res != taken || len(b) != 12 {
		t.Fatalf("take = %d bytes, %v", len(b), res)
	}
	o.release(b)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	close(ended)
	if b, res := o.take(ended); res != taken || string(b) != "x" {
		t.Fatalf("take = %q, %v", b, res)
	}
	if _, res := o.take(ended); res != drained {
		t.Fatalf("take after the end = %v", res)
	}
	o.drop()
	if _, err := o.Write([]byte("y")); !errors.Is(err, errDropped) {
		t.Fatalf("Write after drop = %v", err)
	}
}

func TestMemoryForgetsTheOldestFirst(t *testing.T) {
	t.Parallel()
	m := newMemory(3)
	for _, k := range []string{"a", "b", "c", "d"} {
		m.put(k, k+"!")
	}
	if _, ok := m.get("a"); ok {
		t.Error("a is remembered past the bound")
	}
	for _, k := range []string{"b", "c", "d"} {
		if v, ok := m.get(k); !ok || v != k+"!" {
			t.Errorf("%s = %q, %v", k, v, ok)
		}
	}
	if m.len() != 3 {
		t.Errorf("len = %d", m.len())
	}
}

func TestDiagnosticsPathOfPTY(t *testing.T) {
	uid := "0b7e2a9c-1111-4222-8333-444455556666"
	if path, ok := DiagnosticsPathOfPTY("paperclip-duplex-" + uid); !ok || path != DiagnosticsPath(uid) {
		t.Errorf("duplex PTY: %q, %v; want %q", path, ok, DiagnosticsPath(uid))
	}
	if _, ok := DiagnosticsPathOfPTY("paperclip-login-pty-" + uid); ok {
		t.Error("a login PTY has no diagnostics file")
	}
}

// An open whose terminal has ended succeeds when the ready marker was seen
// first (a quick command), whichever case select picked.
func TestStartedOrEndedPrefersTheMarker(t *testing.T) {
	t.Parallel()
	ready := make(chan struct{})
	if err := startedOrEnded(ready); !errors.Is(err, errEndedBeforeCommand) {
		t.Errorf("no marker: %v, want errEndedBeforeCommand", err)
	}
	close(ready)
	if err := startedOrEnded(ready); err != nil {
		t.Errorf("marker seen: %v, want nil", err)
	}
}
