// Command bench-compare measures daytona-worker against the Node plugin it
// replaces, side by side on one machine: the two workers are run in turn,
// each against a fresh local Daytona emulator, and every figure is printed
// as min / median / max over the runs with the ratio of the two, as a
// Markdown table (the one docs/benchmarks.md shows).
//
// It measures a cold start (spawn → initialize reply, with a trivial Go
// binary for the floor), commands one at a time (latency and the worker's
// CPU per command), the relay of large outputs (throughput, CPU, peak
// memory, byte-exactness of result and stream, with our own client alone
// for what the emulator delivers) and a burst of concurrent executes over
// many leases (errors, completion times, memory).
//
// `make bench-compare` builds what it needs and prepares the Node plugin
// with ../shared/tools/reference-worker/setup (npm on its first run).
package main

import (
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("bench-compare", flag.ContinueOnError)
	flags.SetOutput(stderr)
	workerBin := flags.String("worker", "bin/daytona-worker", "the daytona-worker binary")
	floorBin := flags.String("floor", "bin/bench-floor", "the trivial Go binary (cmd/bench-compare/floor)")
	libFloorBin := flags.String("lib-floor", "", "the trivial Go binary linking the worker's imports (cmd/bench-compare/floor built with -tags libfloor), started in the cold start's loop too (empty: left out)")
	httpFloorBin := flags.String("http-floor", "", "the trivial Go binary linking net/http (cmd/bench-compare/floor built with -tags httpfloor), started in the cold start's loop too (empty: left out)")
	setup := flags.String("reference-setup", "../shared/tools/reference-worker/setup", "the script that prepares the Node plugin and prints the command that starts it")
	only := flags.String("scenarios", "cold,execute,relay,burst", "comma-separated scenarios to run")
	emulatorBin := flags.String("emulator", "", "the daytona-emulator binary, run as its own process for each fresh emulator (empty: the emulator runs inside bench-compare, sharing its process with the host)")
	cpuProfile := flags.String("cpuprofile", "", "write bench-compare's own CPU profile (the host's side, and the emulator's when it runs inside) to this file")
	withNode := flags.Bool("node", true, "measure the Node plugin too (false: daytona-worker alone, no npm needed)")
	runs := flags.Int("runs", 3, "runs of each side per scenario (cold start: -cold-runs)")
	coldRuns := flags.Int("cold-runs", 20, "runs of each side for the cold start")
	executes := flags.Int("executes", 100, "commands per run in the one-at-a-time scenario")
	relayMB := flags.Int("relay-mb", 100, "MB of output in the relay's line and big-line runs")
	controlMB := flags.Int("control-mb", 20, "MB of output in the relay's control-byte run")
	leases := flags.Int("burst-leases", 100, "leases in the burst")
	burstExecutes := flags.Int("burst-executes", 1000, "executes sent at once in the burst")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		want[strings.TrimSpace(s)] = true
	}

	workers := []worker{{side: sideGo, argv: []string{*workerBin}}}
	if *withNode {
		nodeCmd, err := prepareReference(*setup, stderr)
		if err != nil {
			return err
		}
		workers = append(workers, worker{side: sideNode, argv: nodeCmd})
	}
	b := &bench{
		workers: workers,
		seed:    maphash.MakeSeed(),
		log:     stderr,

		emulatorBin: *emulatorBin,
	}
	for _, f := range []struct{ side, bin string }{{sideFloor, *floorBin}, {sideHTTPFloor, *httpFloorBin}, {sideLibFloor, *libFloorBin}} {
		if f.bin != "" {
			b.floors = append(b.floors, worker{side: f.side, argv: []string{f.bin}})
		}
	}
	started := time.Now().UTC()
	loadBefore := loadAverage()
	steps := []struct {
		name string
		run  func() error
	}{
		{"cold", func() error { return b.coldStart(*coldRuns) }},
		{"execute", func() error { return b.executeLatency(*runs, *executes) }},
		{"relay", func() error { return b.relay(*runs, relayOutputs(b.seed, *relayMB, *controlMB)) }},
		{"burst", func() error { return b.burst(*runs, *leases, *burstExecutes) }},
	}
	for _, s := range steps {
		if want[s.name] {
			if err := s.run(); err != nil {
				return err
			}
		}
	}

	fmt.Fprintf(stdout, "Measured %s with `make bench-compare` (%s), %d runs of each side alternating (cold start: %d), a fresh emulator per run.\n",
		started.Format("2006-01-02"), strings.Join(args, " "), *runs, *coldRuns)
	fmt.Fprintf(stdout, "Machine: %d cores (%s), load average %s before and %s after; %s, %s; daytona-worker %s.\n\n",
		runtime.NumCPU(), machine(), loadBefore, loadAverage(), runtime.Version(), version("node", "--version"), version("git", "describe", "--always", "--dirty"))
	switch {
	case *emulatorBin != "":
		fmt.Fprintf(stdout, "Layout: the emulator, the worker and bench-compare's host are three processes sharing every core.\n\n")
	default:
		fmt.Fprintf(stdout, "Layout: the emulator runs inside bench-compare, beside its host; the worker is its own process.\n\n")
	}
	b.t.print(stdout)
	return nil
}

// prepareReference runs the reference worker's setup script and returns the
// command it prints on its last line.
func prepareReference(setup string, stderr io.Writer) ([]string, error) {
	cmd := exec.Command(setup)
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("prepare the Node plugin with %s: %w", setup, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	argv := strings.Fields(lines[len(lines)-1])
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s printed no command", setup)
	}
	return argv, nil
}

func version(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return name + " (unknown version)"
	}
	v := strings.TrimSpace(string(out))
	if name == "node" {
		return "Node " + v
	}
	return v
}
