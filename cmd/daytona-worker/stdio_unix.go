//go:build unix

package main

import (
	"os"
	"syscall"
)

// pollable opens descriptor fd anew for the runtime's network poller when it
// is a pipe or a socket (as the host's stdin and stdout are); ok is false,
// and nothing changed, for anything else. restore puts the descriptor back
// in blocking mode; call it before the process exits, since the mode belongs
// to the open file, which other processes may hold too.
//
// A blocking read of stdin keeps an operating-system thread waiting on the
// host for the worker's whole life, and every request then wakes it and
// hands the request to another thread; through the poller the wait costs no
// thread and the read happens on whichever thread runs the reader. Terminals
// and files keep their blocking mode: a terminal shares the non-blocking
// flag with the shell it came from. So does a pipe that is also stderr
// (`2>&1 | tee`): stderr is written without the poller, and a non-blocking
// stderr would drop log lines whenever the pipe is full.
func pollable(fd int, name string) (f *os.File, restore func(), ok bool) {
	return pollableBeside(fd, name, 2)
}

// pollableBeside is pollable with stderr at descriptor errFd.
func pollableBeside(fd int, name string, errFd int) (f *os.File, restore func(), ok bool) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, nil, false
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return nil, nil, false
	}
	var errSt syscall.Stat_t
	if fd != errFd && syscall.Fstat(errFd, &errSt) == nil && errSt.Dev == st.Dev && errSt.Ino == st.Ino {
		return nil, nil, false
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, nil, false
	}
	return os.NewFile(uintptr(fd), name), func() { _ = syscall.SetNonblock(fd, false) }, true
}
