package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/rs/zerolog"
)

var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"health","params":{}}`,
	`{"jsonrpc":"2.0","id":"x","method":"echo","params":[1,"a",{"b":null}],"paperclipInvocation":{"id":"i","scope":{"companyId":"c"}}}`,
	`{"jsonrpc":"2.0","method":"onEvent"}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":[]}}`,
	`{"jsonrpc":"2.0","id":null,"method":"x"}`,
	`{"jsonrpc":"1.0"}`,
	`[]`, `null`, `"s"`, `{`, "\x00", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
	`{"jsonrpc":"2.0","id":1e400,"method":"x"}`,
}

// FuzzParseMessage checks the decoder never panics and classifies every
// object consistently with the SDK's rules.
func FuzzParseMessage(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseMessage(line)
		if err != nil {
			if m != nil {
				t.Fatal("message and error both returned")
			}
			return
		}
		switch m.kind {
		case kindRequest:
			if len(m.id) == 0 || isJSONNull(m.id) {
				t.Fatalf("request without id: %q", line)
			}
		case kindNotification:
			if m.id != nil {
				t.Fatalf("notification with id: %q", line)
			}
		case kindResponse, kindInvalid:
		default:
			t.Fatalf("unknown kind %d", m.kind)
		}
	})
}

// FuzzConnInput feeds arbitrary bytes to a serving Conn: it must never
// panic, every line it writes must be one valid JSON object, and it must
// return cleanly at end of input.
func FuzzConnInput(f *testing.F) {
	var all bytes.Buffer
	for _, s := range fuzzSeeds {
		f.Add([]byte(s + "\n"))
		all.WriteString(s + "\r\n")
	}
	f.Add(all.Bytes())
	f.Fuzz(func(t *testing.T, input []byte) {
		var out bytes.Buffer
		c := New(bytes.NewReader(input), &out, Options{Logger: zerolog.Nop()})
		err := c.Serve(context.Background(), HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
			return req.Params, nil
		}))
		if err != io.EOF {
			t.Fatalf("Serve returned %v, want io.EOF", err)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(line, &obj); err != nil {
				t.Fatalf("output line is not a JSON object: %q", line)
			}
			if string(obj["jsonrpc"]) != `"2.0"` {
				t.Fatalf("output line without jsonrpc 2.0: %q", line)
			}
		}
	})
}
