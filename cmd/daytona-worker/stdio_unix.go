//go:build unix

package main

import (
	"os"
	"syscall"
)

// pollable opens descriptor fd anew for the runtime's network poller when it
// is a pipe or a socket (as the host's stdin and stdout are); ok is false,
// and nothing changed, for anything else.
//
// A blocking read of stdin keeps an operating-system thread waiting on the
// host for the worker's whole life, and every request then wakes it and
// hands the request to another thread; through the poller the wait costs no
// thread and the read happens on whichever thread runs the reader. Terminals
// and files keep their blocking mode: a terminal shares the non-blocking
// flag with the shell it came from.
func pollable(fd int, name string) (f *os.File, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, false
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return nil, false
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, false
	}
	return os.NewFile(uintptr(fd), name), true
}
