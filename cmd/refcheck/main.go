// Command refcheck plays the scenarios under testdata/refcheck through the
// Node reference worker and through daytona-worker, each against its own
// Daytona emulator, and prints per scenario identical, documented (naming
// the differences.txt rows) or different (with both sides). It exits 1 when
// any scenario is different. `make refcheck` prepares the reference worker
// and runs it; see internal/refcheck for the scenario format.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/paperclipai/daytona-worker/internal/differences"
	"github.com/paperclipai/daytona-worker/internal/refcheck"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		reference = flag.String("reference", "node /tmp/reference-worker/worker.mjs", "command that starts the reference worker")
		worker    = flag.String("worker", "bin/daytona-worker", "command that starts daytona-worker")
		dir       = flag.String("scenarios", "testdata/refcheck", "folder of scenario files")
		list      = flag.String("differences", "differences.txt", "the list of documented differences")
		only      = flag.String("run", "", "only scenarios whose name matches this regexp")
		verbose   = flag.Bool("v", false, "print each worker's stderr for scenarios that differ")
		parallel  = flag.Int("parallel", 3, "how many scenarios to play at once, each against emulators of its own (results print in order)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rows, err := differences.Load(*list)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refcheck:", err)
		return 2
	}
	scenarios, err := refcheck.LoadDir(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refcheck:", err)
		return 2
	}
	var filter *regexp.Regexp
	if *only != "" {
		if filter, err = regexp.Compile(*only); err != nil {
			fmt.Fprintln(os.Stderr, "refcheck: -run:", err)
			return 2
		}
	}
	refCmd := refcheck.Command{Argv: strings.Fields(*reference)}
	ourCmd := refcheck.Command{Argv: strings.Fields(*worker)}
	if len(ourCmd.Argv) > 0 && !filepath.IsAbs(ourCmd.Argv[0]) && strings.Contains(ourCmd.Argv[0], "/") {
		if abs, err := filepath.Abs(ourCmd.Argv[0]); err == nil {
			ourCmd.Argv[0] = abs
		}
	}

	var picked []*refcheck.Scenario
	for _, sc := range scenarios {
		if filter == nil || filter.MatchString(sc.Name) {
			picked = append(picked, sc)
		}
	}
	// Scenarios play up to -parallel at once (each against emulators of its
	// own); their results print in order as each is done.
	plays := make([]chan played, len(picked))
	for i := range plays {
		plays[i] = make(chan played, 1)
	}
	slots := make(chan struct{}, max(1, *parallel))
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, sc := range picked {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				close(plays[i])
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				plays[i] <- play(ctx, sc, refCmd, ourCmd, rows)
			}()
		}
	}()
	var summary refcheck.Summary
	for _, ch := range plays {
		p, ok := <-ch
		if !ok || ctx.Err() != nil {
			break
		}
		summary.Add(p.result)
		p.result.Print(os.Stdout, rows)
		if *verbose && p.result.Verdict == refcheck.Different {
			for _, side := range []string{"reference", "worker"} {
				fmt.Printf("    --- %s stderr:\n%s\n", side, indent(string(p.stderr[side])))
			}
		}
	}
	fmt.Println(summary)
	if summary.Different > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

// played is one scenario's comparison and each side's stderr.
type played struct {
	result *refcheck.Result
	stderr map[string][]byte
}

// play runs a scenario through both workers at once and compares them.
func play(ctx context.Context, sc *refcheck.Scenario, refCmd, ourCmd refcheck.Command, rows *differences.List) played {
	stderr := map[string][]byte{}
	var mu sync.Mutex
	opts := refcheck.Options{Stderr: func(_, side string, b []byte) {
		mu.Lock()
		defer mu.Unlock()
		stderr[side] = b
	}}
	var (
		wg             sync.WaitGroup
		refOut, ourOut []*refcheck.StepOutput
		refErr, ourErr error
	)
	wg.Add(2)
	go func() { defer wg.Done(); refOut, refErr = refcheck.Play(ctx, sc, refCmd, opts, "reference") }()
	go func() { defer wg.Done(); ourOut, ourErr = refcheck.Play(ctx, sc, ourCmd, opts, "worker") }()
	wg.Wait()
	r := refcheck.Compare(sc, refOut, ourOut, rows)
	if refErr != nil || ourErr != nil {
		r.Verdict = refcheck.Different
		r.Problem = fmt.Sprintf("harness: reference: %v; worker: %v", refErr, ourErr)
	}
	return played{result: r, stderr: stderr}
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > 8000 {
		s = s[len(s)-8000:]
	}
	return "      " + strings.ReplaceAll(s, "\n", "\n      ")
}
