// Package oneprocessor puts the process on one processor (GOMAXPROCS=1) as
// its packages initialise, unless the GOMAXPROCS environment variable is set.
// daytona-worker's main package imports it for that effect alone.
//
// Why one processor: see Apply. Why from a package initialiser and not from
// main: the runtime starts with a processor per core, and the initialisers
// that run before main (net/http's, crypto/tls's and about 90 more) allocate
// on whichever processor the main goroutine was scheduled on, which is the
// second one in some starts and not others. Shrinking to one processor in
// main then dropped the second one's cache of memory spans, and the first
// had to fetch its own: on this project's virtual machine, about 100 more
// page faults before the first reply in two starts of three, and 1–1.5 ms.
// Go initialises a package as soon as everything it imports is, lowest
// import path first, so this one, which imports only runtime and syscall,
// runs about fourteenth, before nearly all of that allocation.
package oneprocessor

import (
	"runtime"
	"syscall"
)

func init() {
	// syscall, not os: os initialises much later.
	Apply(func(key string) string {
		v, _ := syscall.Getenv(key)
		return v
	})
}

// Apply runs the process's goroutines on one processor (GOMAXPROCS=1) unless
// getenv("GOMAXPROCS") is set and not empty.
//
// The worker waits on the host and on Daytona nearly all the time and works
// in short bursts between: an execute is five of them (the request, the
// dispatch's answer, the log stream's handshake, its close, the exit code),
// each handing work between a few goroutines. With a second processor idle,
// every such hand-off wakes another thread, which spins, finds nothing and
// sleeps again; that was over a third of an execute's CPU (half the context
// switches, measured with perf). One processor runs the same hand-offs as
// queue operations. Blocking system calls still release it, and the relay,
// the largest steady work, measured no slower on it (its CPU is copying and
// escaping, one goroutine at a time). A host that wants parallel Go code
// sets GOMAXPROCS.
func Apply(getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
