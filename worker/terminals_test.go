package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/pty"
	"github.com/paperclipai/daytona-worker/rpc"
)

func TestSerialKeyOrdersOneRoutesWritesAndOneSessionsInput(t *testing.T) {
	t.Parallel()
	w := New(nil, Options{})
	defer func() { _ = w.ptys.Close(t.Context()) }()
	for _, tt := range []struct {
		method, params, want string
	}{
		{"duplexChannelWrite", `{"hostRouteId":"duplex-route-1","workerSessionId":"s","data":"AA=="}`, "duplex\x00duplex-route-1"},
		{"duplexChannelWrite", `{"data":"AA==","workerSessionId":"s","nested":{"hostRouteId":"x"},"hostRouteId":"duplex-route-2"}`, "duplex\x00duplex-route-2"},
		{"duplexChannelWrite", `{"hostRouteId":7}`, ""},
		{"duplexChannelWrite", `{"hostRouteId":`, ""},
		{"duplexChannelWrite", `[]`, ""},
		{"loginPtyInput", `{"workerSessionId":"pty-1","data":"code\r"}`, "login\x00pty-1"},
		{"loginPtyInput", `{"data":"x"}`, ""},
		// Stops and closes never wait behind a write.
		{"duplexChannelStop", `{"hostRouteId":"duplex-route-1","workerSessionId":"s"}`, ""},
		{"duplexChannelClose", `{"hostRouteId":"duplex-route-1"}`, ""},
		{"loginPtyStop", `{"workerSessionId":"pty-1"}`, ""},
		{"health", `{}`, ""},
	} {
		got := w.SerialKey(requestOf(tt.method, tt.params))
		assert.Equal(t, tt.want, got, "%s %s", tt.method, tt.params)
	}
}

// While a shutdown drains, the closes of terminals are still answered (the
// host retires a worker whose close it cannot confirm); nothing else is.
func TestOnlyTerminalClosesAreAnsweredDuringShutdown(t *testing.T) {
	t.Parallel()
	w := New(nil, Options{})
	defer func() { _ = w.ptys.Close(t.Context()) }()
	for _, method := range protocol.SupportedMethods() {
		want := method == "loginPtyClose" || method == "duplexChannelClose"
		assert.Equal(t, want, w.AnswersDuringShutdown(&rpc.Request{Method: method}), method)
	}
}

func TestDuplexDataIsStreamedAsTheSDKEncodesIt(t *testing.T) {
	t.Parallel()
	d := duplexData{route: pty.Route{HostRouteID: "duplex-route-1", SessionID: `duplex-"q"`}, data: []byte{0, 0xff, '\n', 0xfe}}
	b, err := json.Marshal(d)
	assert.NoError(t, err)
	assert.Equal(t, `{"hostRouteId":"duplex-route-1","workerSessionId":"duplex-\"q\"","chunk":"AP8K/g=="}`, string(b))
}

// wireLine is one line the worker wrote: a reply or a notification.
type wireLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// terminalWire speaks to a served worker as the host does, line by line.
type terminalWire struct {
	s      *servedWorker
	base   string // the lease's scope members of an open
	lines  chan wireLine
	nextID int
}

func newTerminalWire(t *testing.T, s *servedWorker, l *handlerLease) *terminalWire {
	lines := make(chan wireLine, 1024)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) }) // before serveWorker's, which ends the output
	go func() {
		defer close(lines)
		for s.lines.Scan() {
			var m wireLine
			if json.Unmarshal(s.lines.Bytes(), &m) != nil {
				continue
			}
			select {
			case lines <- m:
			case <-done: // nobody reads any more; keep draining the output
			}
		}
	}()
	return &terminalWire{s: s, lines: lines,
		base: `"driverKey":"daytona","companyId":"c","environmentId":"e","providerLeaseId":"` + l.id + `"`}
}

// send writes a request and returns its id.
func (tw *terminalWire) send(t *testing.T, method, params string) string {
	t.Helper()
	tw.nextID++
	id := strconv.Itoa(tw.nextID)
	_, err := io.WriteString(tw.s.in, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":`+params+"}\n")
	require.NoError(t, err)
	return id
}

// until reads lines, handing each to take, until take reports it has what
// it waited for.
func (tw *terminalWire) until(t *testing.T, what string, take func(wireLine) bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-tw.lines:
			require.True(t, ok, "the worker's output ended while waiting for %s", what)
			if take(m) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s from the worker", what)
		}
	}
}

// call sends a request and returns its reply; the notifications read
// meanwhile go to notes.
func (tw *terminalWire) call(t *testing.T, method, params string, notes func(wireLine)) wireLine {
	t.Helper()
	id := tw.send(t, method, params)
	var reply wireLine
	tw.until(t, "reply to "+method, func(m wireLine) bool {
		if m.Method != "" {
			notes(m)
			return false
		}
		reply = m
		return string(m.ID) == id
	})
	return reply
}

// removeDuplexDiagnostics removes, when the test ends, the diagnostics
// files the duplex channels of env's sandboxes left in /tmp (shared with
// this machine's).
func removeDuplexDiagnostics(t *testing.T, env *emulatortest.Env) {
	t.Cleanup(func() { pty.RemoveDiagnostics(env.Server.PTYSessionIDs()) })
}

// newSessionHome is a login session home, removed with its parent (when
// empty) after the test: sandbox processes share this machine's /tmp.
func newSessionHome(t *testing.T) string {
	home := "/tmp/paperclip-adapter-login/" + uuid.NewString()
	t.Cleanup(func() {
		_ = os.RemoveAll(home)
		_ = os.Remove(filepath.Dir(home))
	})
	return home
}

// installClaudeStandIn puts the stand-in claude CLI on the login shell's
// PATH in the lease's sandbox.
func installClaudeStandIn(t *testing.T, env *emulatortest.Env, id string) {
	t.Helper()
	v, ok := env.Server.Sandbox(id)
	require.True(t, ok)
	standIn, err := os.ReadFile(filepath.Join("..", "testdata", "standins", "claude"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(v.HomeDir, ".bash_profile"), []byte(`export PATH="$HOME/bin:$PATH"`+"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(v.HomeDir, "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(v.HomeDir, "bin", "claude"), standIn, 0o755))
}

// A duplex channel through the worker: the open's reply binds the route,
// the bytes written come back from cat exactly (as base64 chunks on the
// route), a write that is no base64 or over the host's limit is refused, a
// stop ends the channel with an exit on the route, and the close is
// acknowledged with the session it bound. (That nothing precedes the open's
// reply is checked here only in passing: the race is too narrow to lose
// reliably; the end-to-end host checks it on every route.)
func TestDuplexChannelRoutesBytesBothWays(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	removeDuplexDiagnostics(t, env)
	s := serveWorker(t)
	l := acquireThroughHandler(t, s.w, env.APIKey, env.APIURL)
	tw := newTerminalWire(t, s, l)
	const route = "duplex-route-1"
	early := func(m wireLine) { t.Errorf("a notification before the open's reply: %s %s", m.Method, m.Params) }
	rep := tw.call(t, "duplexChannelOpen", `{"hostRouteId":"`+route+`",`+tw.base+`,"command":["cat"]}`, early)
	require.Nil(t, rep.Error, "open: %+v", rep.Error)
	var opened protocol.DuplexChannelOpenResult
	require.NoError(t, json.Unmarshal(rep.Result, &opened))
	assert.Equal(t, route, opened.HostRouteID)
	assert.Regexp(t, `^duplex-[0-9a-f-]{36}$`, opened.WorkerSessionID)
	pair := `"hostRouteId":"` + route + `","workerSessionId":"` + opened.WorkerSessionID + `"`

	var echoed []byte
	var exit *protocol.DuplexChannelExit
	notes := func(m wireLine) {
		switch m.Method {
		case protocol.NotifyDuplexChannelData:
			var d struct {
				HostRouteID     string `json:"hostRouteId"`
				WorkerSessionID string `json:"workerSessionId"`
				Chunk           []byte `json:"chunk"` // base64, as encoding/json reads []byte
			}
			require.NoError(t, json.Unmarshal(m.Params, &d))
			assert.Equal(t, opened, protocol.DuplexChannelOpenResult{HostRouteID: d.HostRouteID, WorkerSessionID: d.WorkerSessionID})
			echoed = append(echoed, d.Chunk...)
		case protocol.NotifyDuplexChannelExit:
			exit = &protocol.DuplexChannelExit{}
			require.NoError(t, json.Unmarshal(m.Params, exit))
		default:
			t.Errorf("unexpected notification %s %s", m.Method, m.Params)
		}
	}
	payload := []byte("every byte\x00\x01\x7f\x80\xfe\xff")
	rep = tw.call(t, "duplexChannelWrite", `{`+pair+`,"data":"`+base64.StdEncoding.EncodeToString(payload)+`"}`, notes)
	require.Nil(t, rep.Error, "write: %+v", rep.Error)
	tw.until(t, "the echo", func(m wireLine) bool { notes(m); return len(echoed) >= len(payload) })
	assert.Equal(t, payload, echoed)

	for _, bad := range []struct{ data, message string }{
		{"aGk", "params.data must be non-empty standard base64 with padding"},
		{base64.StdEncoding.EncodeToString(make([]byte, protocol.MaxDuplexChunkBytes+1)), "more than the"},
	} {
		rep = tw.call(t, "duplexChannelWrite", `{`+pair+`,"data":"`+bad.data+`"}`, notes)
		require.NotNil(t, rep.Error)
		assert.Equal(t, protocol.CodeInvalidParams, rep.Error.Code)
		assert.Contains(t, rep.Error.Message, bad.message)
	}

	rep = tw.call(t, "duplexChannelStop", `{`+pair+`}`, notes)
	require.Nil(t, rep.Error, "stop: %+v", rep.Error)
	if exit == nil { // the exit may follow the stop's reply
		tw.until(t, "the channel's exit", func(m wireLine) bool { notes(m); return exit != nil })
	}
	assert.Equal(t, route, exit.HostRouteID)
	assert.Equal(t, opened.WorkerSessionID, exit.WorkerSessionID)
	assert.Equal(t, payload, echoed, "nothing refused reached cat")

	rep = tw.call(t, "duplexChannelClose", `{"hostRouteId":"`+route+`"}`, notes)
	require.Nil(t, rep.Error)
	assert.JSONEq(t, `{`+pair+`}`, string(rep.Result), "the close names the session the route bound")
	rep = tw.call(t, "duplexChannelWrite", `{`+pair+`,"data":"aGk="}`, notes)
	require.NotNil(t, rep.Error, "a write to a closed route")
	assert.Contains(t, rep.Error.Message, "the bytes were not written")
}

// A login PTY through the worker: the CLI's prompt comes out as text on the
// session, the code typed goes in, its exit code comes back, and the close
// is acknowledged with the route.
func TestLoginPtyRoutesTextBothWays(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	s := serveWorker(t)
	l := acquireThroughHandler(t, s.w, env.APIKey, env.APIURL)
	installClaudeStandIn(t, env, l.id)
	home := newSessionHome(t)
	tw := newTerminalWire(t, s, l)
	const route = "login-route-1"
	early := func(m wireLine) { t.Errorf("a notification before the open's reply: %s %s", m.Method, m.Params) }
	rep := tw.call(t, "loginPtyOpen", `{"hostRouteId":"`+route+`",`+tw.base+`,"loginCommandKey":"claude","sessionHome":"`+home+`"}`, early)
	require.Nil(t, rep.Error, "open: %+v", rep.Error)
	var opened protocol.LoginPtyOpenResult
	require.NoError(t, json.Unmarshal(rep.Result, &opened))
	assert.Regexp(t, `^pty-[0-9a-f-]{36}$`, opened.WorkerSessionID)

	var out strings.Builder
	var exit *protocol.LoginPtyExit
	notes := func(m wireLine) {
		switch m.Method {
		case protocol.NotifyLoginPtyOutput:
			var o protocol.LoginPtyOutput
			require.NoError(t, json.Unmarshal(m.Params, &o))
			assert.Equal(t, route, o.HostRouteID)
			assert.Equal(t, opened.WorkerSessionID, o.WorkerSessionID)
			out.WriteString(o.Chunk)
		case protocol.NotifyLoginPtyExit:
			exit = &protocol.LoginPtyExit{}
			require.NoError(t, json.Unmarshal(m.Params, exit))
		default:
			t.Errorf("unexpected notification %s %s", m.Method, m.Params)
		}
	}
	tw.until(t, "the prompt", func(m wireLine) bool {
		notes(m)
		return strings.Contains(out.String(), "Paste code here if prompted > ")
	})
	assert.Contains(t, out.String(), "https://claude.ai/oauth/authorize?code=true&state=stand-in")
	session := `"workerSessionId":"` + opened.WorkerSessionID + `"`
	rep = tw.call(t, "loginPtyInput", `{`+session+`,"data":"CODE-4F2A\r"}`, notes)
	require.Nil(t, rep.Error, "input: %+v", rep.Error)
	tw.until(t, "the exit", func(m wireLine) bool { notes(m); return exit != nil })
	assert.Equal(t, route, exit.HostRouteID)
	require.NotNil(t, exit.ExitCode)
	assert.Equal(t, 7, *exit.ExitCode, "the CLI's own exit code")
	assert.Contains(t, out.String(), "€ received [CODE-4F2A]")

	rep = tw.call(t, "loginPtyInput", `{`+session+`,"data":"late\r"}`, notes)
	require.NotNil(t, rep.Error, "input after the exit")
	assert.Contains(t, rep.Error.Message, "the input was not written")
	rep = tw.call(t, "loginPtyStop", `{`+session+`}`, notes)
	assert.Nil(t, rep.Error, "a stop of an ended session is fine")
	rep = tw.call(t, "loginPtyClose", `{"hostRouteId":"`+route+`"}`, notes)
	require.Nil(t, rep.Error)
	assert.JSONEq(t, `{"hostRouteId":"`+route+`"}`, string(rep.Result))
}

// A terminal opens on the sandbox of its lease only: one the worker still
// holds, or, after a restart, one it can look up with an account it knows
// (one it used, or DAYTONA_API_KEY) that carries the company's and the
// environment's labels. Anything else gets the plugin's "no cached sandbox".
func TestTerminalOpensResolveOnlyTheLeasesSandbox(t *testing.T) {
	t.Parallel()
	env, first, l := leaseOnEmulator(t, emulator.Options{})
	removeDuplexDiagnostics(t, env)
	released := acquireThroughHandler(t, first, env.APIKey, env.APIURL)
	_, err := first.Handle(t.Context(), requestOf("environmentReleaseLease", `{`+released.base+`,"providerLeaseId":"`+released.id+`"}`))
	require.NoError(t, err)
	withKey := map[string]string{"DAYTONA_API_KEY": env.APIKey, "DAYTONA_API_URL": env.APIURL}
	tests := []struct {
		name       string
		worker     string            // "first" (holds the lease), else a restarted worker
		getenv     map[string]string // a restarted worker's environment
		used       bool              // the restarted worker has used the lease's account
		lease      string
		scope      string // companyId and environmentId members
		unreadable bool   // looking the sandbox up is refused (403)
		opens      bool
	}{
		{name: "held by the worker", worker: "first", lease: l.id, opens: true},
		{name: "released by the worker", worker: "first", lease: released.id},
		{name: "after a restart, with DAYTONA_API_KEY", getenv: withKey, lease: l.id, opens: true},
		{name: "after a restart, on an account the worker used since", used: true, lease: l.id, opens: true},
		{name: "after a restart, with DAYTONA_API_KEY and the account used", getenv: withKey, used: true, lease: l.id, opens: true},
		{name: "after a restart, with no account to look it up with", lease: l.id},
		{name: "after a restart, another company's", getenv: withKey, lease: l.id, scope: `"companyId":"c-2","environmentId":"e"`},
		{name: "after a restart, another environment's", getenv: withKey, lease: l.id, scope: `"companyId":"c","environmentId":"e-2"`},
		{name: "after a restart, a sandbox that does not exist", getenv: withKey, lease: "no-such-sandbox"},
		{name: "after a restart, a sandbox the key may not read", getenv: withKey, lease: l.id, unreadable: true},
	}
	for i, tt := range tests {
		w := first
		if tt.worker != "first" {
			w = New(discardHost{}, Options{Logger: zerolog.Nop(), Getenv: func(k string) string { return tt.getenv[k] }})
			t.Cleanup(func() { _ = w.Close(context.Background()) })
			if tt.used {
				own := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
				require.NoError(t, own.destroy(t.Context()))
			}
		}
		scope := tt.scope
		if scope == "" {
			scope = `"companyId":"c","environmentId":"e"`
		}
		if tt.unreadable {
			remove := env.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, SandboxID: tt.lease, Status: 403})
			t.Cleanup(remove)
		}
		for _, method := range []string{"duplexChannelOpen", "loginPtyOpen"} {
			route := fmt.Sprintf("route-%d-%s", i, method)
			params := `{"hostRouteId":"` + route + `","driverKey":"daytona",` + scope + `,"providerLeaseId":"` + tt.lease + `",`
			want := msgNoDuplexSandbox
			if method == "duplexChannelOpen" {
				params += `"command":["true"]}`
			} else {
				params += `"loginCommandKey":"codex","sessionHome":"` + newSessionHome(t) + `"}`
				want = msgNoLoginSandbox
			}
			res, err := w.Handle(t.Context(), requestOf(method, params))
			if !tt.opens {
				assert.EqualError(t, err, want, "%s: %s", tt.name, method)
				continue
			}
			if assert.NoError(t, err, "%s: %s", tt.name, method) {
				b, _ := json.Marshal(res)
				assert.Regexp(t, `"workerSessionId":"(duplex|pty)-`, string(b), "%s: %s", tt.name, method)
			}
			closeMethod := strings.Replace(method, "Open", "Close", 1)
			_, err = w.Handle(t.Context(), requestOf(closeMethod, `{"hostRouteId":"`+route+`"}`))
			assert.NoError(t, err)
		}
	}
}
