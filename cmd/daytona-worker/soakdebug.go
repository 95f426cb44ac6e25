//go:build soakdebug

package main

// A build for the soak test only (go build -tags soakdebug): on SIGUSR1 the
// worker writes its goroutine profile to the file DAYTONA_WORKER_SOAK_DUMP
// names (written beside it, then renamed into place), so the test can tell
// whether a long run left goroutines behind without stopping the worker.
// The shipped worker has none of it.

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func init() {
	path := os.Getenv("DAYTONA_WORKER_SOAK_DUMP")
	if path == "" {
		return
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1)
	go func() {
		for range signals {
			f, err := os.Create(path + ".tmp")
			if err != nil {
				continue
			}
			err = pprof.Lookup("goroutine").WriteTo(f, 1)
			if cerr := f.Close(); err == nil && cerr == nil {
				_ = os.Rename(path+".tmp", path)
			}
		}
	}()
}
