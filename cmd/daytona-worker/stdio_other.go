//go:build !unix

package main

import "os"

// pollable is a Unix refinement (see stdio_unix.go).
func pollable(int, string) (*os.File, func(), bool) { return nil, nil, false }
