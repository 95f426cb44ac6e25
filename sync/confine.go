package sync

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// checkConfined is the plugin's assertConfinedSandboxPath: candidate must be
// an absolute sandbox path at or under remoteDir once normalized. Unlike the
// plugin it also refuses a ".." segment before normalization ("/ws/a/../b"
// normalizes inside the root, but no caller builds such paths, and a
// sandbox-side symlink at "a" would make the shell resolve it elsewhere) and
// a NUL byte, which no file name can hold.
func checkConfined(remoteDir, candidate, label string) error {
	normalized := nodeNormalize(candidate)
	if !nodeIsAbsolute(normalized) || normalized == ".." || strings.Contains(normalized, "/../") ||
		strings.HasSuffix(normalized, "/..") || hasDotDotSegment(candidate) || strings.ContainsRune(candidate, 0) {
		return fmt.Errorf("Daytona sync %s path is not a confined absolute path: %s", label, candidate)
	}
	root := nodeNormalize(remoteDir)
	prefix := root
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if normalized != root && !strings.HasPrefix(normalized, prefix) {
		return fmt.Errorf("Daytona sync %s path escapes the workspace remote dir: %s", label, candidate)
	}
	return nil
}

func hasDotDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// nodeFSError words a host file-system failure as Node does
// ("ENOENT: no such file or directory, stat '/x'"), so the host sees the
// message the plugin's fs calls would have produced.
func nodeFSError(op, path string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s '%s': %w", op, path, err)
	}
	code, text := errnoName(errno)
	if code == "" {
		return fmt.Errorf("%s '%s': %w", op, path, err)
	}
	return &hostFSError{msg: fmt.Sprintf("%s: %s, %s '%s'", code, text, op, path), err: err}
}

// nodeRenameError is a failed fs.rename as Node words it, naming both
// paths: `EISDIR: illegal operation on a directory, rename 'a' -> 'b'`.
func nodeRenameError(from, to string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if code, text := errnoName(errno); code != "" {
			return &hostFSError{msg: fmt.Sprintf("%s: %s, rename '%s' -> '%s'", code, text, from, to), err: err}
		}
	}
	return fmt.Errorf("rename '%s' -> '%s': %w", from, to, err)
}

type hostFSError struct {
	msg string
	err error
}

func (e *hostFSError) Error() string { return e.msg }
func (e *hostFSError) Unwrap() error { return e.err }

// errnoName is libuv's code and text for an errno.
func errnoName(e syscall.Errno) (string, string) {
	switch e {
	case syscall.ENOENT:
		return "ENOENT", "no such file or directory"
	case syscall.EACCES:
		return "EACCES", "permission denied"
	case syscall.EPERM:
		return "EPERM", "operation not permitted"
	case syscall.ENOTDIR:
		return "ENOTDIR", "not a directory"
	case syscall.EISDIR:
		return "EISDIR", "illegal operation on a directory"
	case syscall.ELOOP:
		return "ELOOP", "too many symbolic links encountered"
	case syscall.ENAMETOOLONG:
		return "ENAMETOOLONG", "name too long"
	case syscall.EEXIST:
		return "EEXIST", "file already exists"
	case syscall.ENOTEMPTY:
		return "ENOTEMPTY", "directory not empty"
	case syscall.EXDEV:
		return "EXDEV", "cross-device link not permitted"
	case syscall.ENOSPC:
		return "ENOSPC", "no space left on device"
	case syscall.EROFS:
		return "EROFS", "read-only file system"
	case syscall.EBUSY:
		return "EBUSY", "resource busy or locked"
	case syscall.EMFILE:
		return "EMFILE", "too many open files"
	case syscall.EIO:
		return "EIO", "i/o error"
	case syscall.ENXIO: // opening a socket
		return "ENXIO", "no such device or address"
	case syscall.ENODEV:
		return "ENODEV", "no such device"
	case syscall.ENFILE:
		return "ENFILE", "file table overflow"
	case syscall.EINVAL:
		return "EINVAL", "invalid argument"
	case syscall.ETXTBSY:
		return "ETXTBSY", "text file is busy"
	case syscall.EAGAIN:
		return "EAGAIN", "resource temporarily unavailable"
	case syscall.EFBIG:
		return "EFBIG", "file too large"
	case syscall.EOVERFLOW:
		return "EOVERFLOW", "value too large for defined data type"
	}
	return "", ""
}

// pathErrno extracts the errno of a *fs.PathError (or any wrapped errno).
func pathErrno(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
