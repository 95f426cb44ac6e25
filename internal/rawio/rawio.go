//go:build unix

// Package rawio reads and writes non-blocking descriptors through the
// runtime's network poller, with system calls the scheduler is not told
// about.
//
// os.File and net.Conn announce every read and write to the scheduler as a
// system call that may block (entersyscall), although on a non-blocking
// descriptor none ever does. That announcement is what costs: the first one
// after an idle spell wakes the runtime's monitor thread (sysmon) from its
// deep sleep, which then wakes every 20 µs for as long as the process is busy,
// and a write that takes a while (a loopback write delivers its data to the
// reader before it returns) lets the monitor hand the worker's processor to
// another thread. The worker spends its life waiting and works in short
// bursts, so those thread wake-ups were the largest part of an execute's
// CPU. The poller still does all the waiting: a read that finds nothing, or
// a write that finds the descriptor full, parks the goroutine until it is
// ready, as os and net do.
package rawio

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// ReadFD reads once from the non-blocking descriptor fd into p.
func ReadFD(fd uintptr, p []byte) (int, syscall.Errno) { return uninterrupted(readFD, fd, p) }

// WriteFD writes once to the non-blocking descriptor fd from p.
func WriteFD(fd uintptr, p []byte) (int, syscall.Errno) { return uninterrupted(writeFD, fd, p) }

// uninterrupted makes call on fd and p again for as long as a signal
// interrupts it; an empty p makes no call.
func uninterrupted(call func(uintptr, []byte) (int, syscall.Errno), fd uintptr, p []byte) (int, syscall.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	for {
		n, errno := call(fd, p)
		if errno != syscall.EINTR {
			return n, errno
		}
	}
}

// rawRead and rawWrite are read(2) and write(2) with nothing around them;
// p is not empty.
func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

func rawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

// Shutdown shuts the socket fd down for reading and writing, as close(2)
// would end the connection, but keeps the descriptor.
func Shutdown(fd uintptr) syscall.Errno {
	_, _, errno := syscall.RawSyscall(syscall.SYS_SHUTDOWN, fd, syscall.SHUT_RDWR, 0)
	return errno
}

// Read reads once from rc into p, waiting through the poller while there is
// nothing to read. n == 0 with a nil error is the end of the input. The
// error is the poller's (closed, past a deadline) or a syscall.Errno.
func Read(rc syscall.RawConn, p []byte) (int, error) {
	var (
		n     int
		errno syscall.Errno
	)
	err := rc.Read(func(fd uintptr) bool {
		n, errno = ReadFD(fd, p)
		return errno != syscall.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, errno
	}
	return n, nil
}

// Write writes all of p to rc, waiting through the poller while the
// descriptor is full. The error is the poller's or a syscall.Errno.
func Write(rc syscall.RawConn, p []byte) (int, error) {
	var (
		n     int
		errno syscall.Errno
	)
	err := rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := WriteFD(fd, p[n:])
			if e == syscall.EAGAIN {
				return false
			}
			if e != 0 {
				errno = e
				return true
			}
			n += m
		}
		return true
	})
	if err != nil {
		return n, err
	}
	if errno != 0 {
		return n, errno
	}
	return n, nil
}

// File reads and writes a non-blocking file (a pipe or a socket, as the
// host's stdin and stdout are) with Read and Write. Errors are reported as
// os.File reports them.
type File struct {
	f  *os.File
	rc syscall.RawConn
}

// NewFile wraps f, which must be in non-blocking mode (see os.NewFile).
func NewFile(f *os.File) (*File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &File{f: f, rc: rc}, nil
}

// Read implements io.Reader; io.EOF at the end of the input.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := Read(f.rc, p)
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: f.f.Name(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write implements io.Writer. A write to a pipe nobody reads any more
// (EPIPE) is finished by os.File, which treats it as os.File always does
// (on stdout: the process ends with SIGPIPE, as a shell pipeline's would).
func (f *File) Write(p []byte) (int, error) {
	n, err := Write(f.rc, p)
	if err == syscall.EPIPE {
		m, werr := f.f.Write(p[n:])
		return n + m, werr
	}
	if err != nil {
		return n, &os.PathError{Op: "write", Path: f.f.Name(), Err: err}
	}
	return n, nil
}

// Close closes the file; a Read or Write waiting on it returns.
func (f *File) Close() error { return f.f.Close() }
