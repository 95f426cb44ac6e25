package worker

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// execResultJSON runs one execute and decodes its result.
func execResultJSON(t *testing.T, l *handlerLease, members string) (map[string]any, error) {
	t.Helper()
	res, err := l.execute(t.Context(), members)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m, nil
}

// environmentExecute reads its params as the plugin does: any finite
// timeout is a timeout (JavaScript arithmetic, on both paths, no overflow),
// a timeout that is not a number falls back to the config's, a truthy
// bypassSession runs one-shot, a falsy cwd is no cwd.
func TestExecuteReadsItsParamsAsThePluginDoes(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	l := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
	t.Cleanup(func() { _ = l.destroy(context.Background()) })

	for _, tc := range []struct {
		name, members, stdout string
	}{
		{"session, a timeout past what a Duration holds", `"command":"echo","args":["ran"],"timeoutMs":1e13`, "ran\n"},
		{"session, the largest finite timeout", `"command":"echo","args":["ran"],"timeoutMs":1.7976931348623157e308`, "ran\n"},
		{"one-shot, a timeout of 160 years", `"command":"echo","args":["ran"],"timeoutMs":5e12,"bypassSession":true`, "ran\n"},
		{"a timeout given as a string falls back", `"command":"echo","args":["ran"],"timeoutMs":"5000"`, "ran\n"},
		{"a timeout of an object falls back", `"command":"echo","args":["ran"],"timeoutMs":{"ms":1}`, "ran\n"},
		{"a negative timeout falls back", `"command":"echo","args":["ran"],"timeoutMs":-1`, "ran\n"},
		{"a truthy bypassSession", `"command":"echo","args":["one-shot"],"bypassSession":"yes"`, "one-shot\n"},
		{"a falsy cwd", `"command":"echo","args":["ran"],"cwd":0`, "ran\n"},
		{"env of a number has no keys", `"command":"echo","args":["ran"],"env":5`, "ran\n"},
		// Truncated to 0 ms: the plugin's SDK calls still get a second, and
		// its log stream follows the command to its end.
		{"session, a timeout under 1 ms bounds nothing", `"command":"sh","args":["-c","sleep 0.3; echo done"],"timeoutMs":0.5`, "done\n"},
		{"session, stdin with a timeout under 1 ms", `"command":"cat","stdin":"in","timeoutMs":0.5`, "in\n"},
		{"one-shot, stdin with a timeout under 1 ms", `"command":"cat","stdin":"in","timeoutMs":0.5,"bypassSession":true`, "in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := execResultJSON(t, l, tc.members)
			require.NoError(t, err)
			assert.Equal(t, false, m["timedOut"], "%v", m)
			assert.EqualValues(t, 0, m["exitCode"], "%v", m)
			assert.Equal(t, tc.stdout, m["stdout"])
		})
	}

	// A config timeout of 0 or less (one validation refuses) is such a
	// timeout too.
	for _, ms := range []string{"0", "-5"} {
		l0 := *l
		l0.base = strings.Replace(l.base, `"timeoutMs":60000`, `"timeoutMs":`+ms, 1)
		require.NotEqual(t, l.base, l0.base)
		m, err := execResultJSON(t, &l0, `"command":"sh","args":["-c","sleep 0.3; cat"],"stdin":"done"`)
		require.NoError(t, err, ms)
		assert.Equal(t, "done\n", m["stdout"], "config timeoutMs %s: %v", ms, m)
	}

	// A string env is an object of its characters: its keys are indices,
	// which the plugin refuses as variable names.
	_, err := execResultJSON(t, l, `"command":"true","env":"ab"`)
	assert.EqualError(t, err, "Invalid sandbox environment variable key: 0")

	// Reading the lease's id throws in the plugin without a lease object.
	_, err = l.w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentExecute, `{`+l.base+`,"command":"true"}`))
	var rpcErr *protocol.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, protocol.CodeInvalidParams, rpcErr.Code)
	// A falsy id is "no lease".
	for _, id := range []string{`null`, `""`, `0`, `false`} {
		res, err := l.w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentExecute, `{`+l.base+`,"lease":{"providerLeaseId":`+id+`},"command":"true"}`))
		require.NoError(t, err, id)
		b, _ := json.Marshal(res)
		assert.JSONEq(t, `{"exitCode":1,"timedOut":false,"stdout":"","stderr":"No provider lease ID available for execution."}`, string(b), id)
	}
}

// A session command that outlives a timeout too large for a Duration is
// reported with the plugin's arithmetic (Math.round(ms / 1000) written as
// JavaScript writes numbers), never a wrapped-around negative.
func TestTimeoutMessageUsesJavaScriptArithmetic(t *testing.T) {
	t.Parallel()
	for ms, want := range map[float64]string{
		1000:    "Command timed out after 1 s.",
		1499:    "Command timed out after 1 s.",
		1500:    "Command timed out after 2 s.",
		1e13:    "Command timed out after 10000000000 s.",
		1e24:    "Command timed out after 1e+21 s.",
		9.3e15:  "Command timed out after 9300000000000 s.",
		2.5e300: "Command timed out after 2.5000000000000002e+297 s.", // as Node writes it
	} {
		c := &command{timeoutMs: ms}
		assert.Equal(t, want, c.timeoutMessage(), "%g", ms)
		rctx, cancel := c.runContext(t.Context())
		deadline, ok := rctx.Deadline()
		cancel()
		assert.True(t, ok && deadline.After(time.Now().Add(time.Second/2)), "%g: a deadline ahead, never wrapped around", ms)
	}
}

// environmentRealizeWorkspace reads config, lease.metadata?.remoteCwd and,
// without one, workspace.remotePath ?? workspace.localPath: a member read on
// an absent value throws in the plugin (invalid params here), nothing is
// made up.
func TestRealizeReadsItsParamsAsThePluginDoes(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Getenv: func(string) string { return "" }})
	base := `"driverKey":"daytona","companyId":"c","environmentId":"e","config":{}`
	for _, params := range []string{``, `null`, `{}`, `"x"`, `{` + base + `}`, `{` + base + `,"lease":null,"workspace":{}}`,
		`{` + base + `,"lease":{}}`, `{"lease":{"metadata":{"remoteCwd":"/w"}}}`} {
		_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentRealizeWorkspace, params))
		var rpcErr *protocol.Error
		if assert.ErrorAs(t, err, &rpcErr, params) {
			assert.Equal(t, protocol.CodeInvalidParams, rpcErr.Code, params)
		}
	}
	for params, cwd := range map[string]string{
		`{` + base + `,"lease":{"metadata":{"remoteCwd":" /w \u00a0"}}}`:                        "/w",
		`{` + base + `,"lease":{"metadata":{"remoteCwd":"  "}},"workspace":{"localPath":"/l"}}`: "/l",
		`{` + base + `,"lease":"x","workspace":{"remotePath":"/r","localPath":"/l"}}`:           "/r",
		`{` + base + `,"lease":{"providerLeaseId":""},"workspace":{"remotePath":null}}`:         "/paperclip-workspace",
		`{` + base + `,"lease":{},"workspace":{"remotePath":"/r","localPath":-0.5}}`:            "/r",
		`{` + base + `,"lease":{},"workspace":{"remotePath":null,"localPath":"/l"}}`:            "/l",
		`{` + base + `,"lease":{"metadata":"not an object"},"workspace":[]}`:                    "/paperclip-workspace",
	} {
		res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentRealizeWorkspace, params))
		require.NoError(t, err, params)
		b, _ := json.Marshal(res)
		assert.JSONEq(t, `{"cwd":"`+cwd+`","metadata":{"provider":"daytona","remoteCwd":"`+cwd+`"}}`, string(b), params)
	}
}

// A realize whose folder comes out empty ("" as remotePath, or localPath
// without a remotePath) asks Daytona to create it, as the plugin does, and
// answers Daytona's refusal as the SDK words it; it is not refused here
// with words of our own.
func TestRealizeOfAnEmptyPathAnswersDaytonasRefusal(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	for _, ws := range []string{`{"localPath":"/x","remotePath":""}`, `{"localPath":""}`, `{"remotePath":"","localPath":null}`} {
		env.Server.ResetRequests()
		_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentRealizeWorkspace,
			`{`+l.base+`,"lease":{"providerLeaseId":"`+l.id+`"},"workspace":`+ws+`}`))
		require.Error(t, err, ws)
		assert.Equal(t, "Request failed with status code 400", err.Error(), ws)
		assert.Equal(t, 1, env.Server.Requests()["POST /toolbox/{sandboxId}/files/folder"], ws)
	}
}

// A session command's timeoutMs under a second gives it a second, the least
// any of the plugin's calls gets: a command that ends within it answers its
// exit as in the plugin, which follows the command's log stream to its end;
// one that runs longer still times out.
func TestASubSecondTimeoutGivesTheCommandASecond(t *testing.T) {
	t.Parallel()
	for _, ms := range []float64{1.5, 5, 999} {
		c := &command{timeoutMs: math.Trunc(ms)}
		rctx, cancel := c.runContext(t.Context())
		deadline, ok := rctx.Deadline()
		cancel()
		assert.True(t, ok && time.Until(deadline) > 900*time.Millisecond, "%g ms: a deadline a second ahead", ms)
	}
	_, _, l := leaseOnEmulator(t, emulator.Options{})
	for _, ms := range []string{"1.5", "5"} {
		res, err := l.execute(t.Context(), `"command":"sh","args":["-c","echo hi; exit 3"],"timeoutMs":`+ms)
		require.NoError(t, err, ms)
		var got struct {
			ExitCode *int   `json:"exitCode"`
			TimedOut bool   `json:"timedOut"`
			Stdout   string `json:"stdout"`
		}
		require.NoError(t, json.Unmarshal([]byte(resultJSON(t, res)), &got), ms)
		if assert.NotNil(t, got.ExitCode, ms) {
			assert.Equal(t, 3, *got.ExitCode, ms)
		}
		assert.False(t, got.TimedOut, ms)
		assert.Equal(t, "hi\n", got.Stdout, ms)
	}
}

// A config timeoutMs of centuries bounds every call and wait of a lease
// without overflowing: the acquire (its wait for started), a session
// command, a one-shot command (the daemon's timeout is a uint32 of
// seconds), a realize and a release all succeed (row
// timeout-beyond-node-timers).
func TestAConfigTimeoutOfCenturiesBoundsWithoutOverflowing(t *testing.T) {
	t.Parallel()
	_, w, l := leaseOnEmulator(t, emulator.Options{}, `"timeoutMs":1e20`, `"livenessTimeoutMs":1e20`)
	for _, members := range []string{
		`"command":"echo","args":["ran"]`,
		`"command":"echo","args":["ran"],"timeoutMs":1e20`,
		`"command":"echo","args":["ran"],"bypassSession":true`,
		`"command":"echo","args":["ran"],"bypassSession":true,"stdin":"in"`,
	} {
		res, err := l.execute(t.Context(), members)
		require.NoError(t, err, members)
		assert.Contains(t, resultJSON(t, res), `"stdout":"ran\n"`, members)
	}
	_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentRealizeWorkspace,
		`{`+l.base+`,"lease":{"providerLeaseId":"`+l.id+`"},"workspace":{"remotePath":"centuries"}}`))
	require.NoError(t, err)
	res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentReleaseLease, `{`+l.base+`,"providerLeaseId":"`+l.id+`"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"providerLeaseId":"`+l.id+`","state":"destroyed"}`, resultJSON(t, res))
}

// The create timeout names its seconds as the plugin's message does, the
// JavaScript number of toTimeoutSeconds, never a saturated one.
func TestTheCreateTimeoutNamesTheJavaScriptSeconds(t *testing.T) {
	t.Parallel()
	for ms, want := range map[float64]string{
		300000: "300",
		1500:   "2",
		1e20:   "100000000000000000",
		1e25:   "1e+22",
	} {
		err := createError(daytona.ErrTimeout, false, config.Driver{TimeoutMs: ms})
		assert.Equal(t, "Failed to create and start sandbox within "+want+" seconds. Operation timed out.", err.Error(), "%g", ms)
	}
}

// A stdin that is no string is read as Buffer.from reads it: the bytes of
// an array or an array-like object, or refused (ok false) for what
// Buffer.from refuses; a length a request names is bounded.
func TestStdinThatIsNoStringIsReadAsBufferFromReadsIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want []byte // nil: not taken
		err  bool
	}{
		{raw: `[104,105,10]`, want: []byte("hi\n")},
		{raw: `[]`, want: []byte{}},
		{raw: `[256,-1,1.9,"x",null,true,[7],"0x41"," 66 ",{},1e300,-0.5,255.9]`, want: []byte{0, 255, 1, 0, 0, 1, 7, 0x41, 66, 0, 0, 0, 255}},
		{raw: `{"length":3,"0":65,"2":"67"}`, want: []byte{65, 0, 67}},
		{raw: `{"length":1.7,"0":66}`, want: []byte{66}},
		{raw: `{"length":-1}`, want: []byte{}},
		{raw: `{"length":"3"}`, want: []byte{}},
		{raw: `{"length":null}`, want: []byte{}},
		{raw: `{"type":"Buffer","data":[72,73]}`, want: []byte("HI")},
		{raw: `{"type":"Buffer","data":"x"}`},
		{raw: `{"a":1}`},
		{raw: `5`},
		{raw: `true`},
		{raw: `"text"`},
		{raw: `{"length":1e12}`, err: true},
	} {
		got, ok, err := stdinBytes(json.RawMessage(tc.raw))
		switch {
		case tc.err:
			assert.True(t, ok, tc.raw)
			assert.ErrorIs(t, err, errArrayLikeStdinTooLong, tc.raw)
		case tc.want == nil:
			assert.False(t, ok, tc.raw)
		default:
			require.True(t, ok, tc.raw)
			require.NoError(t, err, tc.raw)
			assert.Equal(t, tc.want, got, tc.raw)
		}
	}
}

// Those bytes are what the command reads, in a session and one-shot.
func TestAStdinOfBytesReachesTheCommand(t *testing.T) {
	t.Parallel()
	_, _, l := leaseOnEmulator(t, emulator.Options{})
	for _, members := range []string{
		`"command":"cat","stdin":[104,105,"10"]`,
		`"command":"cat","stdin":{"length":3,"0":104,"1":105,"2":10},"bypassSession":true`,
	} {
		res, err := l.execute(t.Context(), members)
		require.NoError(t, err, members)
		assert.Contains(t, resultJSON(t, res), `"stdout":"hi\n"`, members)
	}
}
