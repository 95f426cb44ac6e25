//go:build libfloor

// The floor built with -tags libfloor links every package daytona-worker
// imports, and nothing of the worker's own: given to bench-compare as
// -lib-floor, it measures how much of the worker's cold start is the linked
// packages' initialisers, which Go runs before main whatever the worker does
// (docs/benchmarks.md, "Why the cold start stays above 1.5×").

package main

import (
	// The imports of daytona-worker's packages outside this module, from
	// `go list -f '{{join .Imports "\n"}}'` over them; blank, so that only
	// their initialisers and what those reach are linked.
	_ "archive/tar"
	_ "compress/flate"
	_ "container/heap"
	_ "crypto/sha256"
	_ "crypto/tls"
	_ "encoding/base64"
	_ "encoding/binary"
	_ "encoding/hex"
	_ "encoding/json"
	_ "flag"
	_ "fmt"
	_ "hash/crc32"
	_ "math/big"
	_ "math/rand/v2"
	_ "mime"
	_ "mime/multipart"
	_ "net"
	_ "net/http"
	_ "net/textproto"
	_ "net/url"
	_ "os/exec"
	_ "os/signal"
	_ "os/user"
	_ "path/filepath"
	_ "regexp"
	_ "runtime/debug"
	_ "runtime/pprof"
	_ "unicode/utf16"

	_ "github.com/coder/websocket"
	_ "github.com/google/uuid"
	_ "github.com/rs/zerolog"
	_ "github.com/sourcegraph/jsonrpc2"
)
