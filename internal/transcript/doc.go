// Package transcript reads, writes, records and replays transcripts of
// worker sessions: newline-delimited JSON files in which each line is one
// step, either a message the host sends or a message the worker must answer
// with, plus a few control steps. They serve as regression tests of the real
// binary (see cmd/daytona-worker) and as the demo session of `make run`.
//
// Step lines (one JSON object each; blank lines and lines starting with '#'
// are comments and are kept on rewrite):
//
//	{"host": {...}}         write this message to the worker's stdin
//	{"host_raw": "text"}    write this raw text (plus a newline), e.g. bad JSON
//	{"worker": {...}}       the next line the worker writes must match this
//	{"unordered": [...]}    the next len(...) lines match these, in any order
//	{"execute_log": {"invocation": "inv-1", "stdout": "…", "stderr": "…"}}
//	                        the execute.log notifications of that invocation
//	                        that come next, joined per stream, are these
//	{"close_stdin": true}   close the worker's stdin
//	{"signal": "SIGTERM"}   send the worker a signal
//	{"exit": 0}             the worker must exit with this code
//	{"sleep_ms": 50}        pause
//	{"hook": "name"}        run the test's hook of that name (e.g. change the
//	                        emulator's state behind the worker's back)
//
// Expected worker messages are compared semantically (key order and
// formatting do not matter) and may contain placeholders in string values:
// "<any>", "<string>", "<nonempty>", "<number>", "<int>", "<bool>",
// "<uuid>", "<iso8601>", "<hex64>", "<redacted>", "<re:REGEXP>" and
// "<capture:NAME>" (matches anything and binds NAME). Inside a longer
// string, "<uuid>", "<any>", "<number>", "<iso8601>" and "<hex64>" match a
// part of it ("paperclip-create-<uuid>"). "${NAME}" in host and worker lines
// is replaced by a variable: one given by the test (DAYTONA_API_URL, ...) or
// one captured earlier.
package transcript
