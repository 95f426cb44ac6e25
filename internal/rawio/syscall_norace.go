//go:build unix && !race

package rawio

import "syscall"

func readFD(fd uintptr, p []byte) (int, syscall.Errno)  { return rawRead(fd, p) }
func writeFD(fd uintptr, p []byte) (int, syscall.Errno) { return rawWrite(fd, p) }
