//go:build unix && race

package rawio

import "syscall"

// Under the race detector the reads and writes go through package syscall,
// whose annotations tell the detector that a write happens before the read
// of its data (which the tests' loopback servers rely on); raw system calls
// carry none. The scheduler is then told of each call as usual.

func readFD(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errnoOf(err)
}

func writeFD(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return n, errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
