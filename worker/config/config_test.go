package config

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rawOf(t *testing.T, js string) Raw {
	t.Helper()
	rc, err := DecodeRaw(json.RawMessage(js))
	require.NoError(t, err)
	return rc
}

// As in the plugin, a timeoutMs past 64 bits is out of range, not absent.
func TestTimeoutMsPast64BitsIsOutOfRange(t *testing.T) {
	t.Parallel()
	cfg := Parse(Raw{"timeoutMs": "0x1FFFFFFFFFFFFFFFFF"})
	assert.Equal(t, 590295810358705700000.0, cfg.TimeoutMs)
	assert.Contains(t, Validate(Raw{"timeoutMs": "0x1FFFFFFFFFFFFFFFFF"}, cfg, "key"), "timeoutMs must be between 1 and 86400000.")
}

func TestParseDriverConfigDefaultsAndCoercions(t *testing.T) {
	t.Parallel()
	c := Parse(rawOf(t, `{"unknown":1,"image":"  daytonaio/sandbox:0.8.0 ","apiKey":"k"}`))
	out, err := json.Marshal(c)
	require.NoError(t, err)
	assert.Equal(t, `{"apiKey":"k","apiUrl":null,"target":null,"snapshot":null,"image":"daytonaio/sandbox:0.8.0","language":null,"timeoutMs":300000,"livenessTimeoutMs":30000,"cpu":null,"memory":null,"disk":null,"gpu":null,"autoStopInterval":15,"autoArchiveInterval":60,"autoDeleteInterval":10080,"reuseLease":false,"archiveOnRelease":false}`, string(out))

	c = Parse(rawOf(t, `{"timeoutMs":"1500.9","livenessTimeoutMs":"nope","autoStopInterval":0,"autoArchiveInterval":"","autoDeleteInterval":-1,"cpu":"2.5","memory":4,"disk":null,"gpu":"","reuseLease":"true","archiveOnRelease":true,"snapshot":"   "}`))
	assert.Equal(t, 1500.0, c.TimeoutMs)
	assert.Equal(t, 30000.0, c.LivenessTimeoutMs, "a non-numeric value falls back to the default")
	assert.Equal(t, 0.0, c.AutoStopInterval, "an explicit 0 is kept")
	assert.Equal(t, 60.0, c.AutoArchiveInterval, "an empty string means unset")
	assert.Equal(t, -1.0, c.AutoDeleteInterval, "an explicit -1 is kept")
	assert.Equal(t, 2.5, *c.CPU)
	assert.Equal(t, 4.0, *c.Memory)
	assert.Nil(t, c.Disk)
	assert.Nil(t, c.GPU)
	assert.False(t, c.ReuseLease, "only the boolean true counts")
	assert.True(t, c.ArchiveOnRelease)
	assert.Nil(t, c.Snapshot)
}

func TestValidateDriverConfigMessagesInOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		env    string
		want   []string
	}{
		{name: "valid with env key", config: `{}`, env: "k", want: nil},
		{name: "valid with config key", config: `{"apiKey":"k","image":"img","cpu":2}`, want: nil},
		{name: "no key anywhere", config: `{"apiKey":"  "}`, env: " ", want: []string{MsgAPIKeyRequired}},
		{name: "everything wrong", env: "k",
			config: `{"image":" ","snapshot":"","apiUrl":"not a url","timeoutMs":0,"livenessTimeoutMs":86400001,"autoStopInterval":-1,"autoArchiveInterval":-5,"autoDeleteInterval":-2,"cpu":0,"memory":-1,"disk":2,"gpu":0}`,
			want: []string{
				"Daytona image cannot be empty.",
				"Daytona snapshot cannot be empty.",
				"apiUrl must be a valid URL.",
				"timeoutMs must be between 1 and 86400000.",
				"livenessTimeoutMs must be less than or equal to 86400000.",
				"autoStopInterval must be greater than or equal to 0.",
				"autoArchiveInterval must be greater than or equal to 0.",
				"autoDeleteInterval must be greater than or equal to -1.",
				msgResourcesNeedImage,
				"cpu must be greater than 0 when provided.",
				"memory must be greater than 0 when provided.",
				"gpu must be greater than 0 when provided.",
			}},
		{name: "image and snapshot", env: "k", config: `{"image":"a","snapshot":"b"}`,
			want: []string{"Daytona sandbox environments must set either image or snapshot, not both."}},
		{name: "timeout too large", env: "k", config: `{"timeoutMs":86400001}`, want: []string{"timeoutMs must be between 1 and 86400000."}},
		{name: "liveness disabled is fine", env: "k", config: `{"livenessTimeoutMs":0}`, want: nil},
		{name: "resources with snapshot", env: "k", config: `{"snapshot":"s","memory":2}`, want: []string{msgResourcesNeedImage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := rawOf(t, tt.config)
			assert.Equal(t, tt.want, Validate(rc, Parse(rc), tt.env))
		})
	}
}

// The answers are Node 20's `new URL(s)` (throws or not), which the plugin's
// check is; a random corpus of 5,425 special-scheme URLs agreed too. Not
// repeated: IDNA's own checks of `xn--` labels (Node refuses "http://xn--").
func TestIsValidURL(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"https://app.daytona.io/api": true,
		"http://127.0.0.1:4000/api":  true,
		"http:/x":                    true,
		"foo:bar":                    true,
		"not a url":                  false,
		"http://":                    false,
		"/relative":                  false,
		"app.daytona.io":             false,
		"http://exa mple.com":        false,
		"http://1.2.3.4.5":           false,
		"http://999.1.1.1":           false,
		"http://x:99999":             false,
		"http://a<b":                 false,
		"http://%41.com":             true,
		" https://x.io":              true,
		"https://x.io ":              true,
		"\thttps://x.io":             true,
		"https://x\n.io":             true,
		"http://0x7f.1":              true,
		"http://0x7g.1":              false,
		"http://1.2.3":               true,
		"http://4294967295":          true,
		"http://4294967296":          false,
		"http://1.2.3.256":           false,
		"http://1.2.3.4.":            true,
		"http://1.2.3.4..":           true,
		"http://a.1":                 false,
		"http://1.a":                 true,
		"http://a.0x":                false,
		"http://a.09":                false,
		"http://a.08.":               false,
		"http://x:65535":             true,
		"http://x:65536":             false,
		"http://x:":                  true,
		"http://x:12a":               false,
		"http://[::1]:80":            true,
		"http://[::1":                false,
		"http://user:pw@host":        true,
		"http://@host":               true,
		"http://user@":               false,
		"http://a^b":                 false,
		"http://a|b":                 false,
		"http://a%b":                 false,
		"http://a%2fb":               false,
		"http://a%00b":               false,
		"https://exa_mple.com":       true,
		"https://ex~ample.com":       true,
		"https://ÄÖ.com":             true,
		"http:\\\\x.io\\api":         true,
		"HTTP://X.IO":                true,
		"http://x.io:0080":           true,
		"http://x.io?q":              true,
		"http://x.io#f":              true,
		"http://[v1.x]":              false,
		"wss://h":                    true,
		"ftp://h":                    true,
		"file:///x":                  true,
		"file://h/x":                 true,
		"mailto:x":                   true,
		"http://.":                   true,
		"http://..":                  true,
		"http://a..b":                true,
		"http://0":                   true,
		"http://00":                  true,
		"http://0x":                  true,
		"http://1.0x":                true,
		"http://%30x7f.1":            true,
		"http://a:b@c:d":             false,
	} {
		assert.Equal(t, want, isValidURL(s), "%q", s)
	}
}

// The hand-written matcher agrees with the pattern it replaces.
func TestURLSchemeMatcherAgreesWithItsPattern(t *testing.T) {
	t.Parallel()
	inputs := []string{"", "a", "A", "_", "0", "a0", "_9", "9a", "a-b", "a.b", "a+b", "A_B", "x y", "é", "a\x00",
		"ab@", "[x", "`", "{", "http", "HTTPS", "git+ssh", "ws.x", "-a", "+a", ".a", "aZ09_", "Z", "z"}
	for i := 0; i < 256; i++ {
		inputs = append(inputs, string(rune(i)), "a"+string([]byte{byte(i)}), string([]byte{byte(i)}))
	}
	scheme := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*$`)
	for _, s := range inputs {
		assert.Equal(t, scheme.MatchString(s), isURLScheme(s), "URL scheme %q", s)
	}
}
