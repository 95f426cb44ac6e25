//go:build !unix

package main

import (
	"io"
	"os"
)

// pollable is a Unix refinement (see stdio_unix.go).
func pollable(int, string) (*os.File, func(), bool) { return nil, nil, false }

// unannounced is a Unix refinement (see stdio_unix.go).
func unannounced(f *os.File) io.ReadWriteCloser { return f }
