// Command playback plays a transcript through a real daytona-worker and
// prints the conversation readably. It is what `make run` runs.
//
//	playback [--worker PATH] [--emulator] [--verbose] FILE
//
// With --emulator it first starts a local Daytona emulator on loopback (in a
// temporary folder, removed afterwards) and gives the transcript the
// variables DAYTONA_API_URL, DAYTONA_API_KEY, EMULATOR_ROOT and CFG (a
// config pointing at it), so the session runs without a Daytona account.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

func main() {
	workerPath := flag.String("worker", "bin/daytona-worker", "the daytona-worker binary to drive")
	withEmulator := flag.Bool("emulator", false, "start a local Daytona emulator for the session")
	verbose := flag.Bool("verbose", false, "print whole messages instead of shortening long values")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: playback [--worker PATH] [--emulator] [--verbose] TRANSCRIPT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	vars := scenario.Vars{}
	if *withEmulator {
		stop, err := startEmulator(vars, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "playback:", err)
			os.Exit(1)
		}
		defer stop()
	}
	if err := play(flag.Arg(0), *workerPath, vars, *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "playback:", err)
		os.Exit(1)
	}
}

// startEmulator serves a local Daytona on a loopback port and fills vars.
func startEmulator(vars scenario.Vars, out io.Writer) (stop func(), err error) {
	quiet := zerolog.Nop()
	l, err := emulator.ServeLoopback(emulator.Options{Logger: &quiet})
	if err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(map[string]any{"apiKey": emulator.DevAPIKey, "apiUrl": l.APIURL, "timeoutMs": 60000})
	vars["DAYTONA_API_URL"] = scenario.StringVar(l.APIURL)
	vars["DAYTONA_API_KEY"] = scenario.StringVar(emulator.DevAPIKey)
	vars["EMULATOR_ROOT"] = scenario.StringVar(l.Root())
	vars["CFG"] = cfg
	fmt.Fprintf(out, "local Daytona emulator at %s (sandboxes under %s)\n", l.APIURL, l.Root())
	return func() { _ = l.Close() }, nil
}

func play(path, workerPath string, vars scenario.Vars, verbose bool, out io.Writer) error {
	steps, err := scenario.ParseFile(path)
	if err != nil {
		return err
	}
	// The worker gets this environment, as it did when started by hand,
	// and its log goes to ours as it writes it.
	proc, err := workerhost.Start(context.Background(), workerhost.Command{Path: workerPath, Env: os.Environ(), Stderr: os.Stderr})
	if err != nil {
		return fmt.Errorf("start the worker: %w", err)
	}
	defer proc.Close()
	fmt.Fprintf(out, "started %s (pid %d)\n\n", workerPath, proc.Pid())
	player := &scenario.Player{
		Worker: proc, Vars: vars,
		Observe: func(fromHost bool, line []byte) {
			arrow := "worker ←"
			if fromHost {
				arrow = "host   →"
			}
			fmt.Fprintf(out, "%s %s\n", arrow, render(line, verbose))
		},
	}
	if _, err := player.Play(steps); err != nil {
		return err
	}
	code, _ := proc.Wait(context.Background())
	fmt.Fprintf(out, "\nworker exited with code %d; every reply matched the transcript\n", code)
	return nil
}

// render shortens long string values so a message fits a terminal line,
// and shows execute.log output as the text it carries.
func render(line []byte, verbose bool) string {
	if verbose {
		return string(line)
	}
	var note struct {
		Method string `json:"method"`
		Params struct {
			Stream string `json:"stream"`
			Chunk  string `json:"chunk"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &note) == nil && note.Method == "execute.log" {
		return fmt.Sprintf("execute.log %s %q", note.Params.Stream, note.Params.Chunk)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(line)
	}
	b, err := scenario.EncodeOrdered(shorten(scenario.Redact(v)))
	if err != nil {
		return string(line)
	}
	return string(b)
}

func shorten(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = shorten(x)
		}
	case []any:
		if len(v) > 8 {
			return append(v[:8:8], fmt.Sprintf("… %d more", len(v)-8))
		}
		for i, x := range v {
			v[i] = shorten(x)
		}
	case string:
		if len(v) > 120 {
			return v[:120] + fmt.Sprintf("… (%d bytes)", len(v))
		}
		return strings.ToValidUTF8(v, "?")
	}
	return v
}
