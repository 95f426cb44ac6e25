//go:build httpfloor

// The floor built with -tags httpfloor links net/http and what it imports,
// and nothing else of the worker's: given to bench-compare as -http-floor,
// it measures what the one library the worker cannot do without (its
// Daytona client and WebSockets are built on it) costs a cold start on its
// own, beside the plain floor the target is stated against.

package main

import _ "net/http"
