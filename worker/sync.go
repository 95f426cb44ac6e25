package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/internal/rawjson"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
	filesync "github.com/paperclipai/daytona-worker/sync"
	"github.com/paperclipai/daytona-worker/worker/config"
)

const (
	msgSyncInNoLease   = "Daytona syncIn requires a provider lease ID."
	msgSyncOutNoLease  = "Daytona syncOut requires a provider lease ID."
	msgSyncNoRemoteDir = "Daytona file sync requires a workspace remote dir on the lease metadata."
	// msgSandboxNotFound is the stable message the plugin gives a sync out
	// whose sandbox is gone: its unexported files no longer exist.
	msgSandboxNotFound = "daytona_sandbox_not_found"
)

func (w *Worker) syncIn(ctx context.Context, raw json.RawMessage) (any, error) {
	return w.runSync(ctx, raw, true)
}

func (w *Worker) syncOut(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := w.runSync(ctx, raw, false)
	if err != nil && errors.Is(err, daytona.ErrNotFound) {
		return nil, errors.New(msgSandboxNotFound)
	}
	return out, err
}

// runSync is the plugin's onEnvironmentSyncIn/Out: the lease must name its
// sandbox and its workspace (the confinement root); sync in records the
// advisory writable set first; the transfer runs as activity on the lease
// (a graceful teardown waits for it) against the started sandbox.
func (w *Worker) runSync(ctx context.Context, raw json.RawMessage, in bool) (any, error) {
	method, noLease := protocol.MethodEnvironmentSyncOut, msgSyncOutNoLease
	if in {
		method, noLease = protocol.MethodEnvironmentSyncIn, msgSyncInNoLease
	}
	var p protocol.SyncParams
	var idValue any
	if err := decodeDriverParams(method, raw, &p, syncParamsPreparer(method, &idValue)); err != nil {
		return nil, err
	}
	if p.Lease.ProviderLeaseID == nil || *p.Lease.ProviderLeaseID == "" {
		return nil, errors.New(noLease)
	}
	_, cfg, err := config.Decode(method, p.Config)
	if err != nil {
		return nil, err
	}
	remoteDir, ok := config.OptionalString(p.Lease.Metadata["remoteCwd"])
	if !ok || remoteDir == "" {
		return nil, errors.New(msgSyncNoRemoteDir)
	}
	ops, err := syncOperations(method, p.Operations)
	if err != nil {
		return nil, err
	}
	secs := timeoutSeconds(cfg.TimeoutMs)
	sc, err := w.scopeFor(p.DriverBaseParams, *p.Lease.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(idValue)
	if in {
		w.syncs.recordWritable(sc.key(), filesync.WritableDirs(ops))
	}
	return w.leases.withActivity(ctx, sc, false, func() (any, error) {
		s, _, err := w.getSandbox(ctx, sc)
		if err != nil {
			return nil, err
		}
		if err := s.ensureStarted(ctx, secs); err != nil {
			return nil, err
		}
		conf := filesync.Config{
			Sandbox: s.toolbox(), RemoteDir: remoteDir, TimeoutSeconds: secs,
			Tracer: &syncTracer{w: w, ctx: ctx}, NewID: w.newID, Now: w.now,
			Local:         isLoopbackURL(s.snapshot().ToolboxProxyURL, w.apiURL(sc.config)),
			FileErrorText: fileErrText,
		}
		var results []filesync.Result
		if in {
			conf.SandboxID = s.id()
			results, err = filesync.In(ctx, conf, ops)
		} else {
			results, err = filesync.Out(ctx, conf, ops)
		}
		if err != nil {
			return nil, err
		}
		w.leases.markFresh(s.key)
		res := protocol.SyncResult{Operations: make([]protocol.SyncOperationResult, len(results))}
		for i, r := range results {
			res.Operations[i] = protocol.SyncOperationResult{
				OperationID: p.Operations[i].OperationID, FilesTransferred: r.FilesTransferred, BytesTransferred: r.BytesTransferred,
			}
		}
		return res, nil
	})
}

// syncParamsPreparer reads method's sync params as the plugin does: the
// base members are only cache keys; of the lease it reads providerLeaseId
// and metadata?.remoteCwd (a lease or metadata that is not an object has none)
// and nothing else. *idValue is the lease id as sent when it is not a string
// (leaseIDMember).
func syncParamsPreparer(method string, idValue *any) func(map[string]json.RawMessage) error {
	return func(obj map[string]json.RawMessage) error {
		if err := nullEntries(obj); err != nil {
			return protocol.InvalidParams(method, err)
		}
		*idValue = prepareSyncMembers(obj)
		return nil
	}
}

func prepareSyncMembers(obj map[string]json.RawMessage) (idValue any) {
	keyOnlyBase(obj)
	onlyKind(obj, "lease", "object")
	nested(obj, "lease", func(lease map[string]json.RawMessage) {
		idValue = leaseIDMember(lease, "providerLeaseId")
		onlyKind(lease, "metadata", "object")
		delete(lease, "expiresAt")
	})
	eachObject(obj, "operations", func(op map[string]json.RawMessage) {
		eachObject(op, "files", func(m map[string]json.RawMessage) {
			syncMappingMembers(m)
		})
		eachObject(op, "postUploadCommands", func(c map[string]json.RawMessage) {
			// max(1, ceil(Number(ms)/1000)); NaN would reach the SDK
			// as no timeout, the call's own then.
			coerceNumber(c, "timeoutMs", nil)
		})
	})
	return idValue
}

// nullEntries finds the first null entry of an operation's files or
// postUploadCommands: the plugin reads its members (`Cannot read
// properties of null (reading 'access')`), and it would decode as an
// empty one.
func nullEntries(obj map[string]json.RawMessage) error {
	var ops []json.RawMessage
	if json.Unmarshal(obj["operations"], &ops) != nil {
		return nil
	}
	for i, raw := range ops {
		var op map[string]json.RawMessage
		if json.Unmarshal(raw, &op) != nil {
			continue
		}
		for _, key := range []string{"files", "postUploadCommands"} {
			var entries []json.RawMessage
			if json.Unmarshal(op[key], &entries) != nil {
				continue
			}
			for j, e := range entries {
				if jsonKindOf(e) == "null" {
					return fmt.Errorf("params.operations[%d].%s[%d] must be an object", i, key, j)
				}
			}
		}
	}
	return nil
}

// syncMappingMembers reads a mapping's members as the plugin does, where it
// reads them leniently: a `kind` that is not a string is neither "file" nor
// "directory", so the mapping is dropped; an `access` that is not a string is
// not "rw"; a `writablePath` is only an advisory value (its String()); only
// a directory's `exclude` is read, spread as `[...(exclude ?? [])]` (a
// string as its characters); followSymlinks is tested for truthiness.
func syncMappingMembers(m map[string]json.RawMessage) {
	truthyFlag(m, "followSymlinks")
	onlyKind(m, "kind", "string")
	onlyKind(m, "access", "string")
	stringifyMember(m, "writablePath")
	var kind string
	isDir := json.Unmarshal(m["kind"], &kind) == nil && kind == filesync.KindDirectory
	if v, ok := m["exclude"]; ok {
		switch {
		case !isDir || jsonKindOf(v) == "null":
			delete(m, "exclude")
		case jsonKindOf(v) == "string":
			var text string
			if json.Unmarshal(v, &text) == nil {
				chars := make([]string, 0, len(text))
				for _, r := range text {
					chars = append(chars, string(r))
				}
				if b, err := json.Marshal(chars); err == nil {
					m["exclude"] = b
				}
			}
		}
	}
	syncMode(m, isDir)
}

// syncMode reads a mapping's mode as the plugin does. A file's mode is
// applied only when `typeof mode === "number"` (in both directions), so any
// other value is ignored: Number("0600") would be 600, the mode 0o1130. A
// directory's mode only decides whether the bundle is read-only,
// `mode !== undefined && (mode & 0o222) === 0`: ToInt32 of Number(mode),
// where null, NaN and the like are 0.
func syncMode(m map[string]json.RawMessage, isDir bool) {
	v, ok := m["mode"]
	if !ok {
		return
	}
	if !isDir {
		if jsonKindOf(v) != "number" {
			delete(m, "mode")
		}
		return
	}
	if jsonKindOf(v) == "null" {
		m["mode"] = json.RawMessage("0")
		return
	}
	coerceNumber(m, "mode", func() json.RawMessage { return json.RawMessage("0") })
}

// coerceNumber replaces a member the plugin uses in arithmetic with
// JavaScript's Number() of it when it is not a number (null stays: the plugin
// tests it with `!= null`). When that is NaN or infinite, the member becomes
// notFinite(), or is dropped when notFinite is nil.
func coerceNumber(obj map[string]json.RawMessage, key string, notFinite func() json.RawMessage) {
	v, ok := obj[key]
	if !ok {
		return
	}
	switch jsonKindOf(v) {
	case "number", "null":
		return
	}
	f := math.NaN()
	if x, ok := js.Decode(v); ok {
		f = js.Number(x)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		if notFinite == nil {
			delete(obj, key)
		} else {
			obj[key] = notFinite()
		}
		return
	}
	obj[key] = json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
}

// eachObject applies fn to every object element of the array member key.
func eachObject(obj map[string]json.RawMessage, key string, fn func(map[string]json.RawMessage)) {
	v, ok := obj[key]
	if !ok || jsonKindOf(v) != "array" {
		return
	}
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil {
		return
	}
	for i, e := range elems {
		if jsonKindOf(e) != "object" {
			continue
		}
		inner, ok := rawjson.Object(e)
		if !ok {
			continue
		}
		fn(inner)
		if b, err := rawjson.AppendObject(nil, inner); err == nil {
			elems[i] = b
		}
	}
	if b, err := json.Marshal(elems); err == nil {
		obj[key] = b
	}
}

// isLoopbackURL reports whether the toolbox (its proxy URL, else the API
// URL) is reached on this machine.
func isLoopbackURL(toolboxProxyURL string, apiURL *string) bool {
	raw := toolboxProxyURL
	if raw == "" && apiURL != nil {
		raw = *apiURL
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return false
	}
	if strings.EqualFold(u.Hostname(), "localhost") {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// syncOperations converts the wire operations, refusing shapes the plugin
// would stumble on with a TypeError.
func syncOperations(method string, in []protocol.SyncOperation) ([]filesync.Operation, error) {
	if in == nil {
		// The plugin's `for (const op of params.operations)`: not iterable.
		return nil, protocol.InvalidParams(method, errors.New("params.operations must be an array"))
	}
	ops := make([]filesync.Operation, len(in))
	for i, op := range in {
		if op.Files == nil {
			return nil, protocol.InvalidParams(method, fmt.Errorf("params.operations[%d].files must be an array", i))
		}
		// The plugin echoes operationId untouched; the result takes it from
		// the params (see runSync), this string only names the operation.
		var id string
		_ = json.Unmarshal(op.OperationID, &id)
		o := filesync.Operation{ID: id, Files: make([]filesync.Mapping, len(op.Files))}
		for j, m := range op.Files {
			fm := filesync.Mapping{
				SourcePath: m.SourcePath, TargetPath: m.TargetPath, Kind: m.Kind, Exclude: m.Exclude,
				FollowSymlinks: m.FollowSymlinks, Access: m.Access, WritablePath: m.WritablePath,
			}
			if m.Mode != nil {
				if method == protocol.MethodEnvironmentSyncOut && m.Kind == filesync.KindFile {
					// The plugin's fs.chmod(temp, mode) refuses it.
					if err := nodeFileModeError(*m.Mode); err != nil {
						return nil, err
					}
				}
				mode := int64(js.ToInt32(*m.Mode))
				fm.Mode = &mode
			}
			o.Files[j] = fm
		}
		for _, pc := range op.PostUploadCommands {
			o.PostUploadCommands = append(o.PostUploadCommands, filesync.PostUploadCommand{
				Command: pc.Command, Cwd: pc.Cwd, TimeoutMs: pc.TimeoutMs,
			})
		}
		ops[i] = o
	}
	return ops, nil
}

// nodeFileModeError is Node's refusal of a numeric fs.chmod mode that is no
// integer in [0, 2^32-1] (its validateUint32), word for word; nil for a
// mode it takes. Ours would otherwise apply ToInt32 of it (-1 is 07777).
func nodeFileModeError(f float64) error {
	received := js.FormatNumber(f)
	isInt := f == math.Trunc(f) && !math.IsInf(f, 0)
	if isInt && math.Abs(f) > 1<<32 {
		received = nodeNumericalSeparator(received)
	}
	switch {
	case !isInt:
		return fmt.Errorf(`The value of "mode" is out of range. It must be an integer. Received %s`, received)
	case f < 0 || f > math.MaxUint32:
		return fmt.Errorf(`The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received %s`, received)
	}
	return nil
}

// nodeNumericalSeparator is Node's addNumericalSeparator: an underscore
// before every group of three characters from the right.
func nodeNumericalSeparator(v string) string {
	start := 0
	if strings.HasPrefix(v, "-") {
		start = 1
	}
	res := ""
	i := len(v)
	for ; i >= start+4; i -= 3 {
		res = "_" + v[i-3:i] + res
	}
	return v[:i] + res
}

// syncStates holds the per-lease sync state: the advisory writable set the
// plugin records (nothing reads it yet; a future isolation wrapper may).
// What incremental sync in needs lives in the sandbox (filesync's
// manifests), not here.
type syncStates struct {
	mu       sync.Mutex
	writable map[string][]string // lease key → directories, in insertion order
}

// recordWritable adds directories to a lease's advisory writable set.
func (s *syncStates) recordWritable(key string, dirs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, dir := range dirs {
		if s.writable == nil {
			s.writable = map[string][]string{}
		}
		if !containsString(s.writable[key], dir) {
			s.writable[key] = append(s.writable[key], dir)
		}
	}
}

// writableDirs returns the advisory writable set of a lease.
func (s *syncStates) writableDirs(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.writable[key]...)
}

func containsString(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// syncTracer reports sync spans to the host with span.record, as the SDK's
// tracer does when the call carries a traceparent.
type syncTracer struct {
	w   *Worker
	ctx context.Context
}

func (t *syncTracer) StartSpan(name string, attrs map[string]any, start time.Time) filesync.Span {
	return &syncSpan{t: t, name: name, attrs: attrs, start: start}
}

type syncSpan struct {
	t      *syncTracer
	name   string
	attrs  map[string]any
	start  time.Time
	failed bool
	ended  bool
}

func (s *syncSpan) SetAttribute(k string, v any) { s.attrs[k] = v }
func (s *syncSpan) SetError()                    { s.failed = true }

func (s *syncSpan) End(end time.Time) {
	if s.ended {
		return
	}
	s.ended = true
	inv := rpc.InvocationFrom(s.t.ctx)
	if inv == nil || inv.Traceparent == "" {
		return
	}
	rec := protocol.SpanRecord{Name: s.name, Attributes: s.attrs, StartTimeMs: s.start.UnixMilli(), EndTimeMs: end.UnixMilli()}
	if s.failed {
		rec.Status = &protocol.SpanStatus{Code: 2}
	}
	s.t.w.sendSpan(s.t.ctx, rec)
}
