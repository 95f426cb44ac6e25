// Command daytona-emulator serves a local Daytona (control plane, toolbox,
// PTYs) for end-to-end tests. Its first stdout line is
// DAYTONA_API_URL=http://HOST:PORT/api; logs go to stderr. SIGINT or SIGTERM
// kills every sandbox process and exits.
//
// The bearer key defaults to emulator.DevAPIKey ("daytona-emulator-dev-key").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "daytona-emulator:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	root := flag.String("root", "", "folder for sandboxes and snapshots (default: a temporary folder removed on exit)")
	apiKey := flag.String("api-key", "", "bearer key to accept (default: "+emulator.DevAPIKey+"; or $DAYTONA_EMULATOR_API_KEY)")
	step := flag.Duration("step-delay", emulator.DefaultStepDelay, "duration of each lifecycle step (0 = synchronous)")
	archive := flag.Duration("archive-delay", 0, "how long archiving lasts (0 = one lifecycle step)")
	transitional := flag.Bool("transitional", false, "create/start/recover answer in a transitional state instead of waiting for started")
	frameSize := flag.Int("log-frame-size", 1024, "max bytes per session-log WebSocket frame")
	split := flag.String("log-split", "", "cut session-log frames further: markers (inside every marker), every:N, random:SEED")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()

	lvl, err := zerolog.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("bad --log-level: %w", err)
	}
	logger := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
	key := *apiKey
	if key == "" {
		key = os.Getenv("DAYTONA_EMULATOR_API_KEY")
	}
	stepDelay := *step
	if stepDelay <= 0 {
		stepDelay = emulator.Synchronous
	}
	splitter, err := parseSplit(*split, *frameSize)
	if err != nil {
		return err
	}
	emu, err := emulator.New(emulator.Options{
		Root:               *root,
		APIKey:             key,
		StepDelay:          stepDelay,
		ArchiveDelay:       *archive,
		ReturnTransitional: *transitional,
		LogFrameSize:       *frameSize,
		LogFrameSplit:      splitter,
		Logger:             &logger,
	})
	if err != nil {
		return err
	}
	defer emu.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// The first stdout line is the contract with whoever started us.
	if _, err := fmt.Fprintf(os.Stdout, "DAYTONA_API_URL=http://%s/api\n", ln.Addr()); err != nil {
		return err
	}
	_ = os.Stdout.Sync()

	srv := &http.Server{Handler: emu, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info().Str("addr", ln.Addr().String()).Str("root", emu.Root()).Msg("daytona emulator listening")

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info().Msg("shutting down")
	// Close the emulator first: it kills sandbox processes and ends WebSockets
	// and blocking handlers, so the HTTP shutdown below drains quickly.
	if err := emu.Close(); err != nil {
		logger.Error().Err(err).Msg("close emulator")
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// parseSplit reads --log-split.
func parseSplit(v string, frameSize int) (emulator.FrameSplitter, error) {
	kind, arg, _ := strings.Cut(v, ":")
	switch kind {
	case "":
		return nil, nil
	case "markers":
		return emulator.SplitInsideMarkers(), nil
	case "every":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad --log-split %q: want every:N with N >= 1", v)
		}
		return emulator.SplitEvery(n), nil
	case "random":
		seed, err := strconv.ParseUint(arg, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad --log-split %q: want random:SEED", v)
		}
		return emulator.SplitRandom(seed, max(frameSize/4, 1)), nil
	default:
		return nil, fmt.Errorf("bad --log-split %q: want markers, every:N or random:SEED", v)
	}
}
