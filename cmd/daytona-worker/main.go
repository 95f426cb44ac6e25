// Command daytona-worker is the Daytona sandbox-provider plugin worker for
// Paperclip: a JSON-RPC 2.0 peer of the Paperclip host over stdin/stdout, one
// JSON message per line. Diagnostics go to stderr; stdout carries nothing but
// protocol lines.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/rpc"
	"github.com/paperclipai/daytona-worker/worker"
	"github.com/paperclipai/daytona-worker/worker/output"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

const usage = `daytona-worker: the Daytona sandbox-provider plugin worker for Paperclip.

The Paperclip host starts it as a child process and speaks JSON-RPC 2.0 over
its stdin and stdout, one JSON message per line. Logs go to stderr.

Usage:
  daytona-worker [flags]
  daytona-worker check [--api-url URL]   test a Daytona account (see check --help)

Flags:
  --log-level LEVEL  debug, info, warn, error or disabled (default info, or
                     DAYTONA_WORKER_LOG_LEVEL when set)
  --record FILE      append every protocol line, both directions, to FILE as a
                     transcript (secrets redacted) for replay as a test
  --max-requests-per-host N
                     requests in flight to one Daytona host at a time (default
                     32); more wait their turn, oldest host request first
  --max-message-chars N
                     the longest line the host reads, in UTF-16 code units
                     (default 134217728, the host's own limit, or
                     DAYTONA_WORKER_MAX_MESSAGE_CHARS when set); an execute
                     result that would be longer carries the start and the
                     end of its output, with a note of what was left out
  --cpuprofile FILE  write a Go CPU profile of the whole run to FILE
                     (go tool pprof), for measuring the worker in place
  --version          print the version and exit
  --help             print this help and exit

Environment:
  DAYTONA_API_KEY    API key used when an environment's config has none
  DAYTONA_API_URL    the Daytona API used when an environment's config has no
                     apiUrl (then DAYTONA_SERVER_URL; default Daytona Cloud), and
                     to find the sandbox of a terminal opened after a restart
  DAYTONA_TARGET     the target (region) used when a config has none
  DAYTONA_WORKER_LOG_LEVEL
                     the log level when --log-level is not given (the host
                     starts the worker without flags)
  DAYTONA_WORKER_MAX_MESSAGE_CHARS
                     --max-message-chars when it is not given (for a host
                     whose line limit was lowered, as its tests do)
  GOMAXPROCS         processors for the worker's goroutines (default 1)
`

func main() {
	// One processor unless the host sets GOMAXPROCS: the worker mostly waits,
	// and with a second one every hand-off between goroutines wakes an idle
	// thread, a large share of the CPU an execute costs.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// Keep the real stdout for the protocol and point os.Stdout at stderr, so
	// a stray print anywhere in the process cannot corrupt the stream.
	stdout := os.Stdout
	os.Stdout = os.Stderr
	var in io.Reader = os.Stdin
	var out io.Writer = stdout
	var restores []func()
	if f, restore, ok := pollable(0, os.Stdin.Name()); ok {
		in = f
		restores = append(restores, restore)
	}
	if f, restore, ok := pollable(1, stdout.Name()); ok {
		out = f
		restores = append(restores, restore)
	}
	code := run(os.Args[1:], in, out, os.Stderr)
	for _, restore := range restores {
		restore()
	}
	// The original stdout shares its descriptor with out: it must not be
	// collected, and the descriptor closed, before the end.
	runtime.KeepAlive(stdout)
	os.Exit(code)
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "check" {
		return runCheck(args[1:], stdout, stderr, os.Getenv)
	}
	flags := flag.NewFlagSet("daytona-worker", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	logLevel := flags.String("log-level", envOr("DAYTONA_WORKER_LOG_LEVEL", "info"), "")
	recordPath := flags.String("record", "", "")
	cpuProfile := flags.String("cpuprofile", "", "")
	perHost := flags.Int("max-requests-per-host", daytona.DefaultMaxRequestsPerHost, "")
	maxMessageChars := flags.String("max-message-chars", envOr("DAYTONA_WORKER_MAX_MESSAGE_CHARS", strconv.Itoa(output.DefaultMaxMessageChars)), "")
	showVersion := flags.Bool("version", false, "")
	showHelp := flags.Bool("help", false, "")
	flags.BoolVar(showHelp, "h", false, "")
	if err := flags.Parse(args); err != nil {
		fmt.Fprintf(stderr, "daytona-worker: %v\n\n%s", err, usage)
		return 2
	}
	if *showHelp {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if *showVersion {
		fmt.Fprintf(stdout, "daytona-worker %s\n", buildVersion())
		return 0
	}
	level, err := zerolog.ParseLevel(strings.ToLower(*logLevel))
	if err != nil || *logLevel == "" {
		fmt.Fprintf(stderr, "daytona-worker: unknown log level %q (want debug, info, warn, error or disabled)\n", *logLevel)
		return 2
	}
	if *perHost < 1 {
		fmt.Fprintf(stderr, "daytona-worker: --max-requests-per-host must be at least 1\n")
		return 2
	}
	maxChars, err := strconv.ParseInt(*maxMessageChars, 10, 64)
	if err != nil || maxChars < 1 {
		fmt.Fprintf(stderr, "daytona-worker: --max-message-chars (or DAYTONA_WORKER_MAX_MESSAGE_CHARS) must be a whole number of at least 1, not %q\n", *maxMessageChars)
		return 2
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Str("component", "daytona-worker").Logger()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			log.Error().Err(err).Msg("cannot write the CPU profile")
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}

	opts := rpc.Options{Logger: log}
	if *recordPath != "" {
		rec, err := scenario.OpenRecorder(*recordPath)
		if err != nil {
			log.Error().Err(err).Msg("cannot open the record file")
			return 1
		}
		defer rec.Close()
		// The host never sends the environment's key, but errors could echo it.
		rec.AddSecret(os.Getenv("DAYTONA_API_KEY"))
		opts.Tap = func(dir rpc.Direction, line []byte) { rec.Record(dir == rpc.FromHost, line) }
	}

	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	conn := rpc.New(stdin, stdout, opts)
	w := worker.New(conn, worker.Options{Logger: log, MaxRequestsPerHost: *perHost, MaxMessageChars: maxChars})
	log.Debug().Str("version", buildVersion()).Int("pid", os.Getpid()).Int("gomaxprocs", runtime.GOMAXPROCS(0)).Msg("serving")
	err = conn.Serve(ctx, w)
	switch {
	case err == nil:
		log.Debug().Msg("shut down by the host")
	case errors.Is(err, io.EOF):
		log.Info().Msg("host closed stdin; exiting")
		closeWithin(w, eofCloseBound)
	default:
		log.Info().Err(err).Msg("stopping on signal")
		closeWithin(w, signalCloseBound)
	}
	return 0
}

// Serve has already given in-flight calls rpc's CancelWait (500 ms) when the
// input ends or a signal comes; what Close still does within these bounds is
// mostly deleting sandboxes that cancelled acquires, probes and setups had
// created. At the end of input the whole stays inside worker.ShutdownBound.
// The host sends SIGTERM when its shutdown drain has run out and SIGKILL
// SIGTERM_GRACE_MS (5 s) later (plugin-worker-manager.js): 4 s + 500 ms
// leaves half a second of that grace to spare.
const (
	eofCloseBound    = worker.ShutdownBound - 500*time.Millisecond
	signalCloseBound = 4 * time.Second
)

// closeWithin releases what the worker holds, giving up after d: the host is
// gone or wants us gone, and exiting promptly matters more than anything
// but the cleanup of sandboxes nobody else knows of.
func closeWithin(w *worker.Worker, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = w.Close(ctx)
}

// envOr is the variable's value, or fallback when it is unset or empty (an
// empty variable in the host's environment must not stop the worker).
func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
