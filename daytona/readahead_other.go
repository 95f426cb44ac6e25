//go:build !unix

package daytona

import "net"

// newReadAheadConn reads ahead only on Unix (see readahead_unix.go); here the
// connection is read as it is.
func newReadAheadConn(conn net.Conn, _ bufferPool, _ *lateCloser) net.Conn { return conn }
