package worker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/pty"
	"github.com/paperclipai/daytona-worker/rpc"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// The plugin's messages for an open whose lease no sandbox resolves.
const (
	msgNoLoginSandbox  = "Daytona login pseudo-terminal: no cached sandbox resolves the provider lease."
	msgNoDuplexSandbox = "Daytona duplex channel: no cached sandbox resolves the provider lease."
)

const (
	// terminalOpenBudget bounds a loginPtyOpen or duplexChannelOpen. The
	// host gives up after 30 s, and a reply it never binds would leave the
	// worker emitting for a route the host does not know: the open ends
	// with an error well before that.
	terminalOpenBudget = 20 * time.Second
	// resolveBound bounds each control-plane lookup of an uncached lease.
	resolveBound = 10 * time.Second
	// teardownTerminalsBound bounds the closing of a lease's terminals
	// when a teardown ends.
	teardownTerminalsBound = 10 * time.Second
)

// terminalSink turns what the terminals produce into host notifications.
// They carry no invocation id: they follow the open's reply.
type terminalSink struct{ host Host }

func (s terminalSink) LoginOutput(r pty.Route, text string) error {
	return s.host.Notify(context.Background(), protocol.NotifyLoginPtyOutput,
		protocol.LoginPtyOutput{HostRouteID: r.HostRouteID, WorkerSessionID: r.SessionID, Chunk: text})
}

func (s terminalSink) LoginExit(r pty.Route, exitCode *int) error {
	return s.host.Notify(context.Background(), protocol.NotifyLoginPtyExit,
		protocol.LoginPtyExit{HostRouteID: r.HostRouteID, WorkerSessionID: r.SessionID, ExitCode: exitCode})
}

func (s terminalSink) DuplexData(r pty.Route, data []byte) error {
	return s.host.Notify(context.Background(), protocol.NotifyDuplexChannelData, duplexData{route: r, data: data})
}

func (s terminalSink) DuplexExit(r pty.Route, exitCode *int, transportClosed bool) error {
	return s.host.Notify(context.Background(), protocol.NotifyDuplexChannelExit,
		protocol.DuplexChannelExit{HostRouteID: r.HostRouteID, WorkerSessionID: r.SessionID, ExitCode: exitCode, TransportClosed: transportClosed})
}

// duplexData is duplexChannel.data's params, base64-encoded straight into
// the output line (rpc.JSONStreamer) rather than through a string first.
type duplexData struct {
	route pty.Route
	data  []byte
}

func (d duplexData) WriteJSON(w io.Writer) error {
	route, _ := json.Marshal(d.route.HostRouteID)
	session, _ := json.Marshal(d.route.SessionID)
	for _, part := range [][]byte{[]byte(`{"hostRouteId":`), route, []byte(`,"workerSessionId":`), session, []byte(`,"chunk":"`)} {
		if _, err := w.Write(part); err != nil {
			return err
		}
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := enc.Write(d.data); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, `"}`)
	return err
}

func (d duplexData) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	err := d.WriteJSON(&b)
	return b.Bytes(), err
}

// SerialKey implements rpc.Serializer: the writes to one duplex route, and
// the input of one login session, are applied in the order they arrived.
// Stops and closes are not queued behind them: a close must be answered
// even while a write waits for a terminal that stopped reading.
func (w *Worker) SerialKey(req *rpc.Request) string {
	switch req.Method {
	case protocol.MethodDuplexChannelWrite:
		if id := leadingStringMember(req.Params, "hostRouteId"); id != "" {
			return "duplex\x00" + id
		}
	case protocol.MethodLoginPtyInput:
		if id := leadingStringMember(req.Params, "workerSessionId"); id != "" {
			return "login\x00" + id
		}
	}
	return ""
}

// AnswersDuringShutdown implements rpc.ShutdownAnswerer: the closes of
// login PTYs and duplex channels are acknowledged while the shutdown drains
// (the official runtime still serves requests while its shutdown hook
// runs), since the host kills a worker whose close it cannot confirm.
func (w *Worker) AnswersDuringShutdown(req *rpc.Request) bool {
	return req.Method == protocol.MethodLoginPtyClose || req.Method == protocol.MethodDuplexChannelClose
}

// leadingStringMember returns the string member key of a JSON object,
// reading members only until it is found: the host puts the ids before the
// data, so a write's payload is not scanned on the read goroutine.
func leadingStringMember(raw json.RawMessage, key string) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		if name, _ := t.(string); name == key {
			var v string
			if dec.Decode(&v) != nil {
				return ""
			}
			return v
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// terminalSandbox resolves the sandbox of a terminal's lease: the cached
// handle (as the plugin does), else, when the worker has restarted since
// the lease was acquired, the sandbox itself, looked up with each account
// the worker knows and accepted only if it carries the company's and the
// environment's labels. sc is non-nil for a lease the worker knows.
func (w *Worker) terminalSandbox(ctx context.Context, companyID, environmentID, leaseID, notFound string) (*daytona.Toolbox, *scope, error) {
	if strings.TrimSpace(leaseID) == "" {
		return nil, nil, errors.New(notFound)
	}
	if known, ok := w.leases.findByProviderLeaseID(leaseID, companyID, environmentID); ok {
		if known.closed {
			// Released, stopped or destroyed: the plugin's teardown evicted
			// the handle its terminals are found by.
			return nil, nil, errors.New(notFound)
		}
		client, err := w.clientFor(known.sc.config, known.sc.apiKey, known.sc.account)
		if err != nil {
			return nil, nil, err
		}
		return client.Toolbox(known.h.snapshot()), &known.sc, nil
	}
	var lastErr error
	for _, client := range w.terminalClients() {
		sbx, err := withBound(ctx, "sandbox.get", resolveBound, func(ctx context.Context) (*daytona.Sandbox, error) {
			return client.Get(ctx, leaseID)
		})
		if err != nil {
			if !errors.Is(err, daytona.ErrNotFound) {
				lastErr = err
			}
			continue
		}
		if sbx.ID == leaseID && sbx.Labels[labelCompany] == companyID && sbx.Labels[labelEnvironment] == environmentID {
			return client.Toolbox(sbx), nil, nil
		}
	}
	if lastErr != nil {
		w.log.Debug().Err(lastErr).Str("sandbox", leaseID).Msg("looking up a terminal's sandbox failed")
	}
	return nil, nil, errors.New(notFound)
}

// terminalClients are the clients of every account the worker has used,
// then the DAYTONA_API_KEY account (at DAYTONA_API_URL, as the SDK reads
// it, else Daytona Cloud).
func (w *Worker) terminalClients() []*daytona.Client {
	w.clients.mu.Lock()
	out := make([]*daytona.Client, 0, len(w.clients.byAccount)+1)
	for _, c := range w.clients.byAccount {
		out = append(out, c)
	}
	w.clients.mu.Unlock()
	key := js.Trim(w.env("DAYTONA_API_KEY"))
	if key == "" {
		return out
	}
	var cfg config.Driver // the endpoint the SDK reads from the environment
	c, err := w.clientFor(cfg, key, accountFingerprint(cfg, key))
	if err != nil {
		return out
	}
	for _, known := range out {
		if known == c {
			return out
		}
	}
	return append(out, c)
}

// openTerminal resolves the lease's sandbox and runs open on it, as
// activity on the lease when the worker knows it (so a teardown waits for
// the open, and a closed lease refuses it with notFound, the plugin's
// message once a teardown has evicted the handle).
func (w *Worker) openTerminal(ctx context.Context, companyID, environmentID, leaseID, notFound string,
	open func(ctx context.Context, tb *daytona.Toolbox) (*pty.Opening, error)) (*pty.Opening, error) {
	tb, sc, err := w.terminalSandbox(ctx, companyID, environmentID, leaseID, notFound)
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return open(ctx, tb)
	}
	var op *pty.Opening
	_, err = w.leases.withActivity(ctx, *sc, false, func() (any, error) {
		var err error
		op, err = open(ctx, tb)
		return nil, err
	})
	if inactive := (*errLeaseInactive)(nil); errors.As(err, &inactive) {
		// A teardown closed the lease meanwhile: the plugin would find no
		// cached handle either.
		return nil, errors.New(notFound)
	}
	return op, err
}

// startAfterReply lets the session's output flow once the open's reply is
// on the wire (at once when there is no reply to wait for).
func startAfterReply(ctx context.Context, op *pty.Opening) {
	if !rpc.AfterReply(ctx, op.Start) {
		op.Start(true)
	}
}

func requireRouteID(method, id string) error {
	if id == "" {
		return protocol.InvalidParams(method, errors.New("params.hostRouteId must be a non-empty string"))
	}
	return nil
}

// The plugin reads a terminal method's members without checking their
// types. The helpers below bring them into the shape the handlers decode,
// doing what the plugin does with each (see differences.txt,
// wrong-param-types): params absent or null are refused (its read throws);
// params of another kind have none of the members it reads.

// prepareTerminalOpen reads an open's members as the plugin does: of the
// scope only the provider lease id is read (falsy, or any value that is no
// string: no sandbox resolves, as no handle's id equals it), the other
// base members only match labels after a restart (row terminal-after-restart),
// and a login descriptor member that is not a string fails the descriptor check.
func prepareTerminalOpen(obj map[string]json.RawMessage) error {
	keyOnlyBase(obj)
	if leaseIDMember(obj, "providerLeaseId") != nil {
		obj["providerLeaseId"] = json.RawMessage(`""`)
	}
	emptyUnlessString(obj, "loginCommandKey", "sessionHome")
	return nil
}

// emptyUnlessString replaces members that are not strings with "": ids the
// plugin looks entries up by (a Map whose keys are strings, an exact ===),
// which then match nothing, as no entry has an empty id.
func emptyUnlessString(obj map[string]json.RawMessage, keys ...string) {
	for _, k := range keys {
		if v, ok := obj[k]; ok && jsonKindOf(v) != "string" {
			obj[k] = json.RawMessage(`""`)
		}
	}
}

// terminalPairParams reads the ids of an input, write or stop.
func terminalPairParams(obj map[string]json.RawMessage) error {
	emptyUnlessString(obj, "hostRouteId", "workerSessionId")
	return nil
}

// closeRoute reads a close's route: the echo, and the id to close by
// ("" when it is not a string: the plugin's Map lookup finds nothing then).
// The plugin echoes hostRouteId as it was sent, whatever its type, and
// never reads workerSessionId: the host confirms the close by comparing
// the echo with what it sent, and retires a worker whose acknowledgement
// does not match, so a close is never refused for the shape of its ids.
func closeRoute(method string, raw json.RawMessage) (echo json.RawMessage, id string, err error) {
	obj, err := paramsObject(method, raw)
	if err != nil {
		return nil, "", err
	}
	echo = obj["hostRouteId"]
	if jsonKindOf(echo) == "string" {
		_ = json.Unmarshal(echo, &id)
	}
	return echo, id, nil
}

func (w *Worker) loginPtyOpen(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.LoginPtyOpenParams
	if err := decodeDriverParams(protocol.MethodLoginPtyOpen, raw, &p, prepareTerminalOpen); err != nil {
		return nil, err
	}
	if err := requireRouteID(protocol.MethodLoginPtyOpen, p.HostRouteID); err != nil {
		return nil, err
	}
	if err := pty.ValidateLogin(p.LoginCommandKey, p.SessionHome); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, terminalOpenBudget)
	defer cancel()
	op, err := w.openTerminal(ctx, p.CompanyID, p.EnvironmentID, p.ProviderLeaseID, msgNoLoginSandbox,
		func(ctx context.Context, tb *daytona.Toolbox) (*pty.Opening, error) {
			return w.ptys.OpenLogin(ctx, tb, pty.LoginRequest{HostRouteID: p.HostRouteID, ProviderLeaseID: p.ProviderLeaseID,
				CommandKey: p.LoginCommandKey, SessionHome: p.SessionHome})
		})
	if err != nil {
		return nil, err
	}
	startAfterReply(ctx, op)
	return protocol.LoginPtyOpenResult{WorkerSessionID: op.Route().SessionID}, nil
}

func (w *Worker) loginPtyInput(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.LoginPtyInputParams
	if err := decodeDriverParams(protocol.MethodLoginPtyInput, raw, &p, terminalPairParams); err != nil {
		return nil, err
	}
	return nil, w.ptys.LoginInput(ctx, p.WorkerSessionID, []byte(p.Data))
}

func (w *Worker) loginPtyStop(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.LoginPtyStopParams
	if err := decodeDriverParams(protocol.MethodLoginPtyStop, raw, &p, terminalPairParams); err != nil {
		return nil, err
	}
	return nil, w.ptys.LoginStop(ctx, p.WorkerSessionID)
}

// loginPtyClose closes by the route id and always acknowledges it: the host
// retires a worker whose close it cannot confirm.
func (w *Worker) loginPtyClose(_ context.Context, raw json.RawMessage) (any, error) {
	echo, id, err := closeRoute(protocol.MethodLoginPtyClose, raw)
	if err != nil {
		return nil, err
	}
	if id != "" {
		w.ptys.LoginClose(id)
	}
	return protocol.LoginPtyCloseResult{HostRouteID: echo}, nil
}

func (w *Worker) duplexChannelOpen(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DuplexChannelOpenParams
	if err := decodeDriverParams(protocol.MethodDuplexChannelOpen, raw, &p, prepareTerminalOpen); err != nil {
		return nil, err
	}
	if err := requireRouteID(protocol.MethodDuplexChannelOpen, p.HostRouteID); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, terminalOpenBudget)
	defer cancel()
	op, err := w.openTerminal(ctx, p.CompanyID, p.EnvironmentID, p.ProviderLeaseID, msgNoDuplexSandbox,
		func(ctx context.Context, tb *daytona.Toolbox) (*pty.Opening, error) {
			return w.ptys.OpenDuplex(ctx, tb, pty.DuplexRequest{HostRouteID: p.HostRouteID, ProviderLeaseID: p.ProviderLeaseID, Command: p.Command})
		})
	if err != nil {
		return nil, err
	}
	startAfterReply(ctx, op)
	r := op.Route()
	return protocol.DuplexChannelOpenResult{HostRouteID: r.HostRouteID, WorkerSessionID: r.SessionID}, nil
}

// duplexChannelWrite applies the bytes only for the exact live pair, and
// only when they are well-formed base64 within the host's write limit.
func (w *Worker) duplexChannelWrite(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DuplexChannelWriteParams
	if err := decodeDriverParams(protocol.MethodDuplexChannelWrite, raw, &p, terminalPairParams); err != nil {
		return nil, err
	}
	data, ok := protocol.DecodeChannelBytes(p.Data)
	if !ok {
		return nil, protocol.InvalidParams(protocol.MethodDuplexChannelWrite,
			errors.New("params.data must be non-empty standard base64 with padding; no bytes were written"))
	}
	if len(data) > protocol.MaxDuplexChunkBytes {
		return nil, protocol.Errorf(protocol.CodeInvalidParams,
			"Invalid params for %s: params.data decodes to %d bytes, more than the %d a write may carry; no bytes were written",
			protocol.MethodDuplexChannelWrite, len(data), protocol.MaxDuplexChunkBytes)
	}
	return nil, w.ptys.DuplexWrite(ctx, pty.Route{HostRouteID: p.HostRouteID, SessionID: p.WorkerSessionID}, data)
}

func (w *Worker) duplexChannelStop(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.DuplexChannelStopParams
	if err := decodeDriverParams(protocol.MethodDuplexChannelStop, raw, &p, terminalPairParams); err != nil {
		return nil, err
	}
	return nil, w.ptys.DuplexStop(ctx, pty.Route{HostRouteID: p.HostRouteID, SessionID: p.WorkerSessionID})
}

// duplexChannelClose closes by the route id and acknowledges with the
// session the route bound, remembered after the channel is gone (a lease
// teardown may have ended it first): the host retires a worker whose
// acknowledgement lacks it.
func (w *Worker) duplexChannelClose(_ context.Context, raw json.RawMessage) (any, error) {
	echo, id, err := closeRoute(protocol.MethodDuplexChannelClose, raw)
	if err != nil {
		return nil, err
	}
	ack := protocol.DuplexChannelCloseResult{HostRouteID: echo}
	if id != "" {
		ack.WorkerSessionID = w.ptys.DuplexClose(id)
	}
	return ack, nil
}

// closeLeaseTerminals closes the login PTYs and duplex channels of a lease.
func (w *Worker) closeLeaseTerminals(ctx context.Context, providerLeaseID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTerminalsBound)
	defer cancel()
	w.ptys.CloseLease(ctx, providerLeaseID)
}
