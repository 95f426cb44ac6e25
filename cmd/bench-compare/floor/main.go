// Command floor is the yardstick of bench-compare's cold start: a trivial Go
// program that answers the host's first request and nothing else, so that a
// worker's spawn → initialize reply can be compared with what any Go binary
// costs to start on the same machine at the same moment. Built with -tags
// libfloor it also links every package the worker imports (libs.go).
package main

import (
	"bufio"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadBytes('\n'); err != nil {
		return
	}
	_, _ = os.Stdout.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"ok":true}}` + "\n")
	// Wait for the host to hang up, as a worker does.
	for {
		if _, err := in.ReadBytes('\n'); err != nil {
			return
		}
	}
}
