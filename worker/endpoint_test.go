package worker

import (
	"testing"

	"github.com/paperclipai/daytona-worker/worker/config"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The SDK's constructor: the config's apiUrl and target, else the process
// environment's, an empty value counting as unset.
func TestEndpointFallsBackToTheSDKsEnvironmentVariables(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	tests := []struct {
		name        string
		env         map[string]string
		cfg         config.Driver
		url, target string
	}{
		{name: "nothing set: Daytona Cloud, the default target"},
		{name: "the config's own", env: map[string]string{"DAYTONA_API_URL": "http://env/api", "DAYTONA_TARGET": "eu"},
			cfg: config.Driver{APIURL: str("http://cfg/api"), Target: str("us")}, url: "http://cfg/api", target: "us"},
		{name: "the environment's", env: map[string]string{"DAYTONA_API_URL": "http://env/api", "DAYTONA_TARGET": "eu"},
			url: "http://env/api", target: "eu"},
		{name: "the deprecated server URL", env: map[string]string{"DAYTONA_SERVER_URL": "http://old/api"}, url: "http://old/api"},
		{name: "the API URL over the server URL", env: map[string]string{"DAYTONA_API_URL": "http://env/api", "DAYTONA_SERVER_URL": "http://old/api"},
			url: "http://env/api"},
		{name: "an empty API URL counts as unset", env: map[string]string{"DAYTONA_API_URL": "", "DAYTONA_SERVER_URL": "http://old/api", "DAYTONA_TARGET": ""},
			url: "http://old/api"},
		{name: "one from each", env: map[string]string{"DAYTONA_API_URL": "http://env/api", "DAYTONA_TARGET": "eu"},
			cfg: config.Driver{Target: str("us")}, url: "http://env/api", target: "us"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := New(discardHost{}, Options{Logger: zerolog.Nop(), Getenv: func(k string) string { return tt.env[k] }})
			url, target := w.endpoint(tt.cfg)
			assert.Equal(t, tt.url, url)
			assert.Equal(t, tt.target, target)
		})
	}
}

// A config without apiUrl and one naming the environment's URL are one
// account (the plugin's fingerprint differs) but must reach the same Daytona.
func TestClientForUsesTheEnvironmentsEndpoint(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DAYTONA_API_URL": "http://127.0.0.1:1/api", "DAYTONA_TARGET": "eu"}
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Getenv: func(k string) string { return env[k] }})
	c, err := w.clientFor(config.Driver{}, "k", accountFingerprint(config.Driver{}, "k"))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:1/api", c.APIURL())
	assert.Equal(t, "eu", c.Target())
}
