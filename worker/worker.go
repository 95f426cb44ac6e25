package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/pty"
	"github.com/paperclipai/daytona-worker/rpc"
	"github.com/paperclipai/daytona-worker/worker/output"
)

// Messages the official runtime and the Daytona plugin use verbatim.
const (
	readyMessage   = "Daytona sandbox provider plugin ready"
	healthyMessage = "Daytona sandbox provider plugin healthy"
)

// Options configure a Worker.
type Options struct {
	// Logger receives diagnostics on stderr; it never sees params.
	Logger zerolog.Logger
	// Getenv reads the process environment (DAYTONA_API_KEY); default os.Getenv.
	Getenv func(string) string
	// Now is the clock for lease bookkeeping and timings; default time.Now.
	Now func() time.Time
	// NewID returns a fresh UUID string; default uuid.NewString.
	NewID func() string
	// HTTPClient performs every Daytona request; default a client with a
	// pooled transport and no overall timeout (each call has its own),
	// built when the first Daytona client is.
	HTTPClient *http.Client
	// MaxRequestsPerHost bounds the requests in flight to each Daytona host
	// (see daytona.RequestQueue); zero: daytona.DefaultMaxRequestsPerHost.
	MaxRequestsPerHost int
	// MaxMessageChars is the longest line the host reads, in UTF-16 code
	// units; zero: output.DefaultMaxMessageChars, the host's own limit. An
	// execute result that would be longer carries the start and the end of
	// its output (see output.Result).
	MaxMessageChars int64
	// MaxStreamedChars is the most of one execute's output, in UTF-16
	// units, the host takes in execute.log notifications; zero:
	// output.DefaultMaxStreamedChars, the host's own. The worker sends no
	// chunk the host would drop for it (see output.Limits).
	MaxStreamedChars int64
	// Timing moves the worker's internal waits (tests shorten them);
	// the zero value keeps the defaults. The staleness of a cached sandbox
	// handle is measured on Now.
	Timing Timing
}

// Worker serves the plugin's methods. Create it with New; it is safe for
// concurrent use.
type Worker struct {
	host   Host
	log    zerolog.Logger
	env    func(string) string
	now    func() time.Time
	newID  func() string
	timing Timing

	// limits are the host's bounds an execute's output keeps to
	// (Options.MaxMessageChars and MaxStreamedChars, defaults filled in).
	limits output.Limits

	clients   clients
	leases    *leases
	spans     spans
	reapers   *reapers           // cleanups of captures that gave up before Daytona finished
	creations *creations         // sandbox creations in flight, which Close lets clean up
	ingress   ingressGenerations // runner ingress generation per sandbox
	syncs     syncStates
	ptys      *pty.Manager // login PTYs and duplex channels

	execOrder *execOrder // executes not dispatched yet, in arrival order

	methods     map[string]methodFunc // built on first use; read-only after
	methodsOnce sync.Once

	mu          sync.Mutex
	initialized bool
	config      configState
}

// configState mirrors the SDK's single-tenant configChanged guard.
type configState struct {
	current   json.RawMessage
	companyID *companyID
}

// New returns a Worker that talks to the host through host.
func New(host Host, opts Options) *Worker {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = uuid.NewString
	}
	limits := output.Limits{Result: opts.MaxMessageChars, Streamed: opts.MaxStreamedChars}
	if limits.Result <= 0 {
		limits.Result = output.DefaultMaxMessageChars
	}
	if limits.Streamed == 0 {
		limits.Streamed = output.DefaultMaxStreamedChars
	}
	w := &Worker{
		host: host, log: opts.Logger, env: opts.Getenv, now: opts.Now, newID: opts.NewID, timing: opts.Timing.withDefaults(),
		limits:    limits,
		clients:   clients{httpClient: opts.HTTPClient, queue: daytona.NewRequestQueue(opts.MaxRequestsPerHost), byAccount: map[string]*daytona.Client{}},
		leases:    newLeases(opts.Now),
		reapers:   newReapers(),
		creations: newCreations(),

		execOrder: newExecOrder(),
	}
	w.ptys = pty.New(pty.Options{Sink: terminalSink{host: host}, NewID: opts.NewID, Logger: opts.Logger, ErrorText: errText})
	return w
}

// Handle implements rpc.Handler: it routes one request to its method.
func (w *Worker) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	// Daytona requests wait for a free slot oldest host request first, so
	// that under a burst the calls complete in about the order they came.
	ctx = daytona.WithWorkStart(ctx, req.Received)
	if req.Method == protocol.MethodEnvironmentExecute {
		turn := w.execOrder.take(req)
		defer turn.done()
		ctx = withExecTurn(ctx, turn)
	}
	switch req.Method {
	case protocol.MethodInitialize:
		return w.initialize(ctx, req.Params)
	case protocol.MethodHealth:
		return protocol.HealthResult{Status: "ok", Message: healthyMessage}, nil
	case protocol.MethodShutdown:
		return nil, w.Close(ctx)
	case protocol.MethodConfigChanged:
		return nil, w.configChanged(req.Params)
	case protocol.MethodOnEvent:
		// The Daytona plugin subscribes to no events.
		return nil, nil
	case protocol.MethodRunJob:
		var p struct {
			Job struct {
				JobKey string `json:"jobKey"`
			} `json:"job"`
		}
		_ = json.Unmarshal(req.Params, &p)
		return nil, fmt.Errorf("No handler registered for job %q", p.Job.JobKey)
	case protocol.MethodGetData, protocol.MethodPerformAction:
		var p struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(req.Params, &p)
		kind := "data"
		if req.Method == protocol.MethodPerformAction {
			kind = "action"
		}
		return nil, fmt.Errorf("No %s handler registered for key %q", kind, p.Key)
	case protocol.MethodExecuteTool:
		var p struct {
			ToolName string `json:"toolName"`
		}
		_ = json.Unmarshal(req.Params, &p)
		return nil, fmt.Errorf("No tool handler registered for %q", p.ToolName)
	case protocol.MethodValidateConfig,
		protocol.MethodHandleWebhook,
		protocol.MethodHandleAPIRequest,
		protocol.MethodDetectExternalObjects,
		protocol.MethodRouteAIConnection,
		protocol.MethodResolveExternalObject,
		protocol.MethodRefreshExternalObjects:
		return nil, protocol.NotImplemented(req.Method)
	}
	// The table is built on first use, not at start: the host's first
	// request (initialize) does not need it.
	w.methodsOnce.Do(func() { w.methods = w.driverMethods() })
	if h, ok := w.methods[req.Method]; ok {
		result, err := h(ctx, req.Params)
		return result, hostError(err)
	}
	if isListed(req.Method) {
		// Advertised, not built yet: the runtime's answer for a missing hook.
		return nil, protocol.NotImplemented(req.Method)
	}
	return nil, protocol.MethodNotFound(req.Method)
}

// Close ends everything the worker holds open (terminals, channels, caches).
// It is the shutdown hook and is also called when the host goes away. The
// sandbox creations in flight (acquire, probe, interactive setup) get a short
// grace to finish, then are cancelled and delete what they created; Close
// returns by ctx's deadline, or ShutdownBound when it has none, and logs the
// sandboxes it could not see deleted.
func (w *Worker) Close(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ShutdownBound)
		defer cancel()
	}
	left := make(chan []*creation, 1)
	go func() { left <- w.creations.close(ctx, w.timing.CreationGrace) }()
	// Terminals first: their sockets are the last thing tying the worker to
	// a sandbox. The handle cache is dropped so a lingering handler cannot
	// reuse it.
	err := w.ptys.Close(ctx)
	w.leases.dropHandles()
	w.ingress.reset()
	w.reapers.close(ctx)
	w.waitSpans(ctx)
	if err != nil {
		w.log.Warn().Err(err).Msg("terminals still closing at shutdown")
	}
	for _, c := range <-left {
		// The sandbox keeps its attempt name and labels: a later destroy
		// (failedCreateCleanup for an acquire) finds it by them.
		w.log.Warn().Str("kind", c.kind).Str("name", c.name).Str("sandbox", c.sandboxID()).
			Msg("exiting before the cleanup of a sandbox created for a cancelled call finished; it may be left behind")
	}
	return nil
}

type methodFunc func(ctx context.Context, params json.RawMessage) (any, error)

// driverMethods lists the environment, login-PTY and duplex methods that are
// implemented; the rest of the advertised list answers -32004.
func (w *Worker) driverMethods() map[string]methodFunc {
	return map[string]methodFunc{
		protocol.MethodEnvironmentValidateConfig:   w.validateConfig,
		protocol.MethodEnvironmentProbe:            w.probe,
		protocol.MethodEnvironmentAcquireLease:     w.acquireLease,
		protocol.MethodEnvironmentResumeLease:      w.resumeLease,
		protocol.MethodEnvironmentReleaseLease:     w.releaseLease,
		protocol.MethodEnvironmentStopLease:        w.stopLease,
		protocol.MethodEnvironmentDestroyLease:     w.destroyLease,
		protocol.MethodEnvironmentRealizeWorkspace: w.realizeWorkspace,
		protocol.MethodEnvironmentExecute:          w.execute,

		protocol.MethodEnvironmentRunnerIngressEndpoint:  w.runnerIngressEndpoint,
		protocol.MethodEnvironmentStartInteractiveSetup:  w.startInteractiveSetup,
		protocol.MethodEnvironmentGetInteractiveSetup:    w.getInteractiveSetup,
		protocol.MethodEnvironmentCaptureTemplate:        w.captureTemplate,
		protocol.MethodEnvironmentCancelInteractiveSetup: w.cancelInteractiveSetup,
		protocol.MethodEnvironmentDeleteTemplate:         w.deleteTemplate,
		protocol.MethodEnvironmentSyncIn:                 w.syncIn,
		protocol.MethodEnvironmentSyncOut:                w.syncOut,
		protocol.MethodLoginPtyOpen:                      w.loginPtyOpen,
		protocol.MethodLoginPtyInput:                     w.loginPtyInput,
		protocol.MethodLoginPtyStop:                      w.loginPtyStop,
		protocol.MethodLoginPtyClose:                     w.loginPtyClose,
		protocol.MethodDuplexChannelOpen:                 w.duplexChannelOpen,
		protocol.MethodDuplexChannelWrite:                w.duplexChannelWrite,
		protocol.MethodDuplexChannelStop:                 w.duplexChannelStop,
		protocol.MethodDuplexChannelClose:                w.duplexChannelClose,
	}
}

func isListed(method string) bool {
	for _, m := range protocol.SupportedMethods() {
		if m == method {
			return true
		}
	}
	return false
}

// initialize answers the host's first call. The runtime reads
// params.manifest, params.config and params.databaseNamespace without
// checking their types, and this plugin uses none of them, so params of any
// shape initialize: a worker that refused a member it never reads (an
// instanceInfo field, an apiVersion of another type) would never start.
func (w *Worker) initialize(ctx context.Context, _ json.RawMessage) (any, error) {
	w.mu.Lock()
	if w.initialized {
		w.mu.Unlock()
		return nil, errors.New("Worker already initialized")
	}
	w.initialized = true
	w.mu.Unlock()
	// The plugin's setup hook logs once, before the reply.
	if err := w.host.Notify(ctx, protocol.NotifyLog, protocol.Log{Level: protocol.LogInfo, Message: readyMessage}); err != nil {
		w.log.Warn().Err(err).Msg("cannot send the ready log")
	}
	return protocol.InitializeResult{OK: true, SupportedMethods: protocol.SupportedMethods()}, nil
}

// decodeParams decodes params into v. The environment driver methods read
// members of their params at once, which throws in the plugin when params
// is absent or null: invalid params here; params of another kind (a string,
// a number) have none of those members and decode as {}. The runtime's own
// methods treat absent or null params as {}.
func decodeParams(method string, raw json.RawMessage, v any) error {
	if strings.HasPrefix(method, "environment") {
		if _, err := paramsObject(method, raw); err != nil {
			return err
		}
		if jsonKindOf(raw) != "object" {
			return nil // members of a string, number or array read as undefined
		}
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return protocol.InvalidParams(method, describeDecodeError(err))
	}
	return nil
}
