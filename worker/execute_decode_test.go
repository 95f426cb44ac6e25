package worker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/shell"
)

// TestDecodeExecuteIsTheHandlersDecoder checks decodeExecute, the decoder
// environmentExecute uses, on what hosts send: unknown members are
// tolerated, env keeps its order and drops values that are not strings, and
// wrong types are invalid params naming the member.
func TestDecodeExecuteIsTheHandlersDecoder(t *testing.T) {
	t.Parallel()
	base := `"driverKey":"daytona","companyId":"c","environmentId":"e","issueId":"i","config":{"timeoutMs":"5000","future":1},` +
		`"lease":{"providerLeaseId":"sbx","metadata":{"remoteCwd":"/w"},"expiresAt":null,"future":true}`

	p, env, cfg, err := decodeExecute(json.RawMessage(`{` + base + `,"command":"ls","args":["-l","a b"],"cwd":"/w",` +
		`"env":{"Z":"1","N":2,"A":"x","Z":"3","B":null},"stdin":"in","timeoutMs":1500.5,"bypassSession":true,"newThing":[1]}`))
	require.NoError(t, err)
	assert.Equal(t, "daytona", p.DriverKey)
	assert.Equal(t, "c", p.CompanyID)
	assert.Equal(t, "e", p.EnvironmentID)
	assert.Nil(t, p.IssueID, "issueId is not read by execute")
	assert.Equal(t, "sbx", *p.Lease.ProviderLeaseID)
	assert.Equal(t, "/w", p.Lease.Metadata["remoteCwd"])
	assert.Equal(t, "ls", p.Command)
	assert.Equal(t, []string{"-l", "a b"}, p.Args)
	assert.Equal(t, "/w", *p.Cwd)
	assert.Equal(t, "in", *p.Stdin)
	assert.Equal(t, 1500.5, *p.TimeoutMs)
	assert.True(t, p.BypassSession)
	assert.Equal(t, []shell.Var{{Key: "Z", Value: "3", Set: true}, {Key: "N"}, {Key: "A", Value: "x", Set: true}, {Key: "B"}}, env,
		"first position of a repeated key, its last value; non-strings marked to be dropped")
	assert.Equal(t, 5000.0, cfg.TimeoutMs, "the config is parsed leniently")

	// The smallest call: everything optional absent.
	p, env, cfg, err = decodeExecute(json.RawMessage(`{` + base + `,"command":"true"}`))
	require.NoError(t, err)
	assert.Nil(t, p.Args)
	assert.Nil(t, p.Cwd)
	assert.Nil(t, p.Stdin)
	assert.Nil(t, p.TimeoutMs)
	assert.False(t, p.BypassSession)
	assert.Empty(t, env)
	assert.Equal(t, 5000.0, cfg.TimeoutMs)

	for _, tt := range []struct{ members, want string }{
		{`"command":5`, "params.command must be a string, not a JSON number"},
		{`"command":"x","args":"-l"`, "params.args must be an array, not a JSON string"},
		{`"command":"x","args":[1]`, "params.args[0] must be a string, not a JSON number"},
		// The plugin's shellQuote throws on null as on any non-string; JSON
		// alone would decode these as "" and run them.
		{`"command":"x","args":["a",null]`, "params.args[1] must be a string, not a JSON null"},
		{`"command":null`, "params.command must be a string, not a JSON null"},
		{`"args":["a"]`, "params.command must be a string"},
	} {
		_, _, _, err := decodeExecute(json.RawMessage(`{` + base + `,` + tt.members + `}`))
		var rpcErr *protocol.Error
		if assert.ErrorAs(t, err, &rpcErr, tt.members) {
			assert.Equal(t, protocol.CodeInvalidParams, rpcErr.Code)
			assert.Equal(t, "Invalid params for environmentExecute: "+tt.want, rpcErr.Message, tt.members)
		}
	}
	_, _, _, err = decodeExecute(json.RawMessage(strings.Replace(`{`+base+`,"command":"x"}`, `"config":{`, `"config":[{`, 1)))
	assert.Error(t, err, "a config that is not an object")

	// Without a lease the call is answered before env and config are read,
	// as in the plugin: they are not decoded, so they cannot fail it.
	p, env, _, err = decodeExecute(json.RawMessage(`{"lease":{},"command":"x","env":[1],"config":7}`))
	require.NoError(t, err)
	assert.False(t, hasLease(p))
	assert.Nil(t, env)
	// Nor can any other member: the plugin reads none of them first.
	for _, members := range []string{`"command":null`, `"command":5,"args":[1,null],"stdin":5,"cwd":7,"timeoutMs":1e400`, `"args":"x"`} {
		p, _, _, err = decodeExecute(json.RawMessage(`{"lease":{"providerLeaseId":0},` + members + `}`))
		require.NoError(t, err, members)
		assert.False(t, hasLease(p), members)
	}
	// What the plugin reads leniently is read so (execute_params_test.go
	// has the rest): a non-number timeout falls back, a flag is truthy.
	p, _, _, err = decodeExecute(json.RawMessage(`{` + base + `,"command":"x","timeoutMs":"60000","bypassSession":"yes"}`))
	require.NoError(t, err)
	assert.Nil(t, p.TimeoutMs)
	assert.True(t, p.BypassSession)
}
