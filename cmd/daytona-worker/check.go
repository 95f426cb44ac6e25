package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
	"github.com/paperclipai/daytona-worker/worker"
)

const checkUsage = `daytona-worker check: can this machine run Paperclip sandboxes on a Daytona?

Runs environmentValidateConfig and environmentProbe through the worker, as the
Paperclip host does when an operator tests an environment: the probe creates
a sandbox, finds its workspace and shell, and removes it. Prints a verdict and
exits 0 when everything works, 1 when something does not.

Usage:
  DAYTONA_API_KEY=… daytona-worker check [flags]

Flags:
  --api-url URL      Daytona API (default $DAYTONA_API_URL, else Daytona Cloud)
  --target REGION    Daytona target, as an environment's "target"
  --snapshot NAME    create the probe sandbox from this snapshot
  --image IMAGE      create the probe sandbox from this image
  --timeout D        give up after D (default 2m, the host's probe limit)
  --log-level LEVEL  the worker's diagnostics on stderr (default warn)

The API key is read from DAYTONA_API_KEY only, and never printed.
`

// The bounds of the steps that do not depend on --timeout, and the id the
// check gives itself as the host's instance, company and environment.
const (
	checkPreflightTimeout = 30 * time.Second
	checkRemovalWait      = 15 * time.Second
	checkCompanyID        = "daytona-worker-check"
)

// runCheck is `daytona-worker check`. It is reached only through that first
// argument, so the worker's own start-up does none of this work.
func runCheck(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	flags := flag.NewFlagSet("daytona-worker check", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	apiURL := flags.String("api-url", getenv("DAYTONA_API_URL"), "")
	target := flags.String("target", "", "")
	snapshot := flags.String("snapshot", "", "")
	image := flags.String("image", "", "")
	timeout := flags.Duration("timeout", 2*time.Minute, "")
	logLevel := flags.String("log-level", "warn", "")
	showHelp := flags.Bool("help", false, "")
	flags.BoolVar(showHelp, "h", false, "")
	if err := flags.Parse(args); err != nil {
		fmt.Fprintf(stderr, "daytona-worker check: %v\n\n%s", err, checkUsage)
		return 2
	}
	if *showHelp {
		fmt.Fprint(stdout, checkUsage)
		return 0
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "daytona-worker check: unexpected argument %q\n\n%s", flags.Arg(0), checkUsage)
		return 2
	}
	level, err := zerolog.ParseLevel(strings.ToLower(*logLevel))
	if err != nil || *logLevel == "" {
		fmt.Fprintf(stderr, "daytona-worker check: unknown log level %q\n", *logLevel)
		return 2
	}
	config := map[string]any{}
	for key, value := range map[string]string{"apiUrl": *apiURL, "target": *target, "snapshot": *snapshot, "image": *image} {
		if value != "" {
			config[key] = value
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c := &checker{
		out:    stdout,
		log:    zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(level).With().Timestamp().Logger(),
		getenv: getenv,
		config: config,
		apiURL: *apiURL,
		target: *target,
	}
	if c.run(ctx, *timeout) {
		return 0
	}
	return 1
}

// checker runs the check and prints its steps as they finish.
type checker struct {
	out    io.Writer
	log    zerolog.Logger
	getenv func(string) string
	config map[string]any
	apiURL string
	target string
	// removalWait bounds the wait for Daytona to report the probe sandbox
	// gone (checkRemovalWait when zero).
	removalWait time.Duration
	failed      bool
}

func (c *checker) step(ok bool, what string, took time.Duration, detail string) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		c.failed = true
	}
	line := fmt.Sprintf("  %s  %-48s", mark, what)
	if took >= 0 {
		line += " " + formatTook(took)
	}
	fmt.Fprintln(c.out, strings.TrimRight(line, " "))
	if detail != "" {
		fmt.Fprintf(c.out, "        %s\n", detail)
	}
}

func formatTook(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

func (c *checker) run(ctx context.Context, timeout time.Duration) bool {
	begin := time.Now()
	shown := c.apiURL
	if shown == "" {
		shown = daytona.DefaultAPIURL + " (Daytona Cloud)"
	} else {
		shown = redactURL(shown)
	}
	fmt.Fprintf(c.out, "daytona-worker %s: checking the Daytona at %s\n", buildVersion(), shown)

	host, err := startInProcessWorker(ctx, c.log, c.getenv)
	if err != nil {
		c.step(false, "start the worker", -1, err.Error())
		return c.verdict(begin)
	}
	defer host.close()

	if !c.initialize(ctx, host) || !c.validate(ctx, host) || !c.preflight(ctx) {
		return c.verdict(begin)
	}
	sandboxID, sandboxName := c.probe(ctx, host, timeout)
	if sandboxID != "" {
		c.removed(ctx, sandboxID, sandboxName)
	}
	return c.verdict(begin)
}

func (c *checker) verdict(begin time.Time) bool {
	took := formatTook(time.Since(begin))
	if c.failed {
		fmt.Fprintf(c.out, "FAIL  this Daytona cannot run Paperclip sandboxes yet (%s)\n", took)
		return false
	}
	fmt.Fprintf(c.out, "PASS  this Daytona can run Paperclip sandboxes (%s)\n", took)
	return true
}

func (c *checker) initialize(ctx context.Context, host *checkHost) bool {
	manifest, _ := json.Marshal(worker.Manifest(checkManifestVersion()))
	var res protocol.InitializeResult
	start := time.Now()
	err := host.call(ctx, protocol.MethodInitialize, map[string]any{
		"manifest": json.RawMessage(manifest), "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": checkCompanyID, "hostVersion": "0.0.0"},
		"apiVersion":   1, "databaseNamespace": nil,
	}, &res)
	if err == nil && !res.OK {
		err = errors.New("initialize answered ok:false")
	}
	if err != nil {
		c.step(false, "initialize the worker", time.Since(start), err.Error())
		return false
	}
	return true
}

// checkManifestVersion is a semver for the manifest sent in initialize: the
// worker's own version when it is one (packaged builds), else a development
// version.
func checkManifestVersion() string {
	v := strings.TrimPrefix(buildVersion(), "v")
	if regexp.MustCompile(`^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$`).MatchString(v) {
		return v
	}
	return "0.0.0-dev"
}

func (c *checker) validate(ctx context.Context, host *checkHost) bool {
	var res struct {
		OK     bool     `json:"ok"`
		Errors []string `json:"errors"`
	}
	start := time.Now()
	err := host.call(ctx, protocol.MethodEnvironmentValidateConfig,
		map[string]any{"driverKey": worker.DriverKey, "config": c.config}, &res)
	took := time.Since(start)
	switch {
	case err != nil:
		c.step(false, "config accepted (environmentValidateConfig)", took, err.Error())
	case !res.OK:
		c.step(false, "config accepted (environmentValidateConfig)", took, strings.Join(res.Errors, " "))
	default:
		c.step(true, "config accepted (environmentValidateConfig)", took, "")
		return true
	}
	return false
}

// preflight makes one authenticated read with the worker's Daytona client,
// to tell an unreachable Daytona from a rejected key before creating anything.
func (c *checker) preflight(ctx context.Context) bool {
	client, err := daytona.New(daytona.Config{
		APIKey: c.getenv("DAYTONA_API_KEY"), APIURL: c.apiURL, Target: c.target, Source: "daytona-worker-check",
	})
	if err != nil {
		c.step(false, "Daytona reachable", -1, err.Error())
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, checkPreflightTimeout)
	defer cancel()
	start := time.Now()
	_, err = client.List(rctx, &daytona.ListOptions{Limit: 1})
	took := time.Since(start)
	var apiErr *daytona.APIError
	switch {
	case err == nil:
		c.step(true, "Daytona reachable, API key accepted", took, "")
		return true
	case errors.As(err, &apiErr) && (errors.Is(err, daytona.ErrUnauthorized) || errors.Is(err, daytona.ErrForbidden)):
		c.step(true, "Daytona reachable", took, "")
		c.step(false, "API key accepted", -1, answered(apiErr))
	case errors.As(err, &apiErr):
		c.step(true, "Daytona reachable", took, "")
		c.step(false, "Daytona answers as a Daytona API", -1,
			answered(apiErr)+" (is --api-url the API's base URL, usually ending in /api?)")
	default:
		c.step(false, "Daytona reachable", took, err.Error())
	}
	return false
}

// answered is what Daytona said when it refused the preflight read: the
// status and the API's own message (the status text when it sent none).
func answered(e *daytona.APIError) string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("Daytona answered %d: %s", e.StatusCode, msg)
}

func (c *checker) probe(ctx context.Context, host *checkHost, timeout time.Duration) (id, name string) {
	var res protocol.ProbeResult
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := host.call(pctx, protocol.MethodEnvironmentProbe, map[string]any{
		"driverKey": worker.DriverKey, "companyId": checkCompanyID, "environmentId": checkCompanyID, "config": c.config,
	}, &res)
	took := time.Since(start)
	const what = "sandbox created and started (environmentProbe)"
	if err != nil {
		c.step(false, what, took, err.Error())
		return "", ""
	}
	meta := func(key string) string {
		if s, ok := res.Metadata[key].(string); ok {
			return s
		}
		return ""
	}
	if !res.OK {
		detail := meta("error")
		if detail == "" {
			detail = res.Summary
		}
		c.step(false, what, took, detail)
		return "", ""
	}
	id, name = meta("sandboxId"), meta("sandboxName")
	c.step(true, what, took, fmt.Sprintf("%s, shell %s, workspace %s", name, meta("shellCommand"), meta("remoteCwd")))
	return id, name
}

// removed confirms the probe's sandbox is gone or going: Daytona deletes in
// the background, so "destroying" counts.
func (c *checker) removed(ctx context.Context, id, name string) {
	client, err := daytona.New(daytona.Config{
		APIKey: c.getenv("DAYTONA_API_KEY"), APIURL: c.apiURL, Target: c.target, Source: "daytona-worker-check",
	})
	if err != nil {
		c.step(false, "sandbox removed", -1, err.Error())
		return
	}
	wait := c.removalWait
	if wait == 0 {
		wait = checkRemovalWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	var last *daytona.Sandbox
	var lastErr error
	for wctx.Err() == nil {
		sb, err := client.Get(wctx, id)
		switch {
		case errors.Is(err, daytona.ErrNotFound):
			c.step(true, "sandbox removed", time.Since(start), "")
			return
		case err == nil && (sb.State == daytona.StateDestroyed || sb.State == daytona.StateDestroying):
			c.step(true, "sandbox removed", time.Since(start), "Daytona is deleting it ("+string(sb.State)+")")
			return
		case err == nil:
			last = sb
		case wctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-wctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	detail := fmt.Sprintf("cannot tell whether %s (%s) is gone: %v", name, id, lastErr)
	if last != nil {
		detail = fmt.Sprintf("%s (%s) is still there in state %s; delete it in the Daytona dashboard", name, id, last.State)
	}
	c.step(false, "sandbox removed", time.Since(start), detail)
}

// redactURL hides what a URL may carry of credentials (user info, query
// values, fragment), also in a URL that does not parse, as --record does.
func redactURL(raw string) string {
	return scenario.RedactURLs(raw)
}

// checkHost plays the Paperclip host for a worker served in this process
// over pipes: the same rpc.Conn and handlers the real host drives.
type checkHost struct {
	toWorker *io.PipeWriter
	cancel   context.CancelFunc
	served   chan struct{}

	mu      sync.Mutex
	nextID  int
	pending map[string]chan rpcReply
	readErr error
}

type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *protocol.Error `json:"error"`
}

func startInProcessWorker(ctx context.Context, log zerolog.Logger, getenv func(string) string) (*checkHost, error) {
	workerIn, toWorker := io.Pipe()
	fromWorker, workerOut := io.Pipe()
	// An interrupted probe still deletes its sandbox (within the worker's
	// cleanup grace), so the worker's handlers get that long to finish.
	conn := rpc.New(workerIn, workerOut, rpc.Options{Logger: log, CancelWait: 25 * time.Second})
	w := worker.New(conn, worker.Options{Logger: log, Getenv: getenv})
	sctx, cancel := context.WithCancel(ctx)
	h := &checkHost{toWorker: toWorker, cancel: cancel, served: make(chan struct{}), pending: map[string]chan rpcReply{}}
	go func() {
		defer close(h.served)
		err := conn.Serve(sctx, w)
		// Nothing reads the worker's input any more: writes must fail, not block.
		_ = workerIn.CloseWithError(io.ErrClosedPipe)
		_ = workerOut.CloseWithError(io.EOF)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
			log.Debug().Err(err).Msg("check: worker stopped")
		}
		closeWithin(w, 500*time.Millisecond)
	}()
	go h.read(fromWorker)
	return h, nil
}

// read takes the worker's lines: replies go to their callers, the worker's
// own calls (span.record) are acknowledged, notifications are dropped.
func (h *checkHost) read(r io.Reader) {
	lines := bufio.NewReader(r)
	for {
		line, err := lines.ReadBytes('\n')
		if len(line) > 0 {
			h.dispatch(line)
		}
		if err != nil {
			h.mu.Lock()
			h.readErr = fmt.Errorf("the worker stopped answering: %w", err)
			for id, ch := range h.pending {
				close(ch)
				delete(h.pending, id)
			}
			h.mu.Unlock()
			return
		}
	}
}

func (h *checkHost) dispatch(line []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		rpcReply
	}
	if json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
		return
	}
	if msg.Method != "" {
		ack, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": nil})
		_, _ = h.toWorker.Write(append(ack, '\n'))
		return
	}
	h.mu.Lock()
	ch := h.pending[string(msg.ID)]
	delete(h.pending, string(msg.ID))
	h.mu.Unlock()
	if ch != nil {
		ch <- msg.rpcReply
	}
}

func (h *checkHost) call(ctx context.Context, method string, params, result any) error {
	h.mu.Lock()
	if h.readErr != nil {
		h.mu.Unlock()
		return h.readErr
	}
	h.nextID++
	id := h.nextID
	ch := make(chan rpcReply, 1)
	h.pending[fmt.Sprint(id)] = ch
	h.mu.Unlock()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if _, err := h.toWorker.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case reply, ok := <-ch:
		if !ok {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.readErr
		}
		if reply.Error != nil {
			return fmt.Errorf("%s failed (%d): %s", method, reply.Error.Code, reply.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(reply.Result, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: gave up: %w", method, context.Cause(ctx))
	}
}

// close shuts the worker down as the host does (unless it already stopped,
// on an interrupt), then waits until it has stopped serving.
func (h *checkHost) close() {
	select {
	case <-h.served:
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.call(ctx, protocol.MethodShutdown, map[string]any{}, nil)
		cancel()
	}
	_ = h.toWorker.Close()
	h.cancel()
	<-h.served
}
