// Package scenario reads, writes, records and plays scenarios of worker
// sessions. One format serves the transcripts (testdata/transcripts:
// regression tests of the real binary in cmd/daytona-worker, and the demo
// session of `make run`), whose worker steps are expectations, and the
// refcheck scenarios (testdata/refcheck, internal/refcheck), whose output is
// collected from two workers and compared.
//
// A scenario is a text file of steps. A step is a line that starts with its
// keyword, then its value; a long value may continue on the lines below,
// indented; options of the step follow on indented lines of their own.
// Lines starting with '#' and blank lines are comments. Rewrites keep
// comments and every unchanged step byte for byte.
//
//	# initialize, then a lease whose id later lines use
//	host {"jsonrpc":"2.0","id":2,"method":"environmentAcquireLease","params":{"config":"${CFG}"}}
//	  capture {"LEASE":"$.result.providerLeaseId"}
//	worker {"jsonrpc":"2.0","id":2,"result":{"providerLeaseId":"<capture:LEASE>",
//	    "metadata":{"sandboxName":"paperclip-<uuid>"}}}
//	hook state LEASE stopped
//	close_stdin
//	exit 0
//
// Steps that act:
//
//	scenario {...}        optional first step of a refcheck scenario: "env"
//	                      (extra environment of both workers, values may use
//	                      variables), "emulator": {"transitional": true,
//	                      "step_delay_ms": N}, "no_initialize": true (the
//	                      scenario sends initialize itself)
//	host {...}            write this message to the worker's stdin
//	host_raw "text"       write this raw text (plus a newline), e.g. bad JSON
//	close_stdin           close the worker's stdin
//	signal SIGTERM        send the worker a signal
//	sleep_ms 50           pause
//	hook NAME ARGS…       run the caller's hook NAME; transcripts name the
//	                      test's own ("heal", "state LEASE stopped"), refcheck
//	                      has emulator actions (`fault {"status": 500, …}`,
//	                      "clear-faults", "stop ID", "delete ID",
//	                      `set-error {"id": ID, …}`, "missing-container ID")
//	sandboxes             (refcheck) output one line describing the
//	                      emulator's sandboxes
//	files PATH            (refcheck) output one line listing a folder of this
//	                      machine (see internal/refcheck)
//
// Steps that expect (transcripts):
//
//	worker {...}          the next line the worker writes must match this
//	unordered [...]       the next len(...) lines match these, in any order
//	execute_log {"invocation": "inv-1", "stdout": "…", "stderr": "…"}
//	                      the execute.log notifications of that invocation
//	                      that come next, joined per stream, are these
//	exit 0                the worker must exit with this code
//
// Options, on a step with output (host, host_raw, close_stdin, sandboxes,
// files), for refcheck, where each such step's output is collected:
//
//	replies N             (host_raw) how many lines to wait for before
//	                      waiting for quiet; a host request waits for its
//	                      reply, close_stdin for the exit
//	timeout_ms N          how long to wait for them
//	capture {"NAME": "$.json.path"}
//	                      bind NAME on each side to that side's value in the
//	                      reply, for later steps
//	differs {"row-id": ["$.json.path", …]}
//	                      where the two sides may differ, and the row of
//	                      differences.txt that says why ("$" is the whole
//	                      output, "$lines" a different line count)
//
// Expected worker messages are compared semantically (key order and
// formatting do not matter) and may contain placeholders in string values:
// "<any>", "<string>", "<nonempty>", "<number>", "<int>", "<bool>",
// "<uuid>", "<iso8601>", "<hex64>", "<redacted>", "<re:REGEXP>" and
// "<capture:NAME>" (matches anything and binds NAME). Inside a longer
// string, "<uuid>", "<any>", "<number>", "<iso8601>" and "<hex64>" match a
// part of it ("paperclip-create-<uuid>"). "${NAME}" in host, host_raw and
// worker values and in hook arguments is replaced by a variable: one the
// caller gives (DAYTONA_API_URL, ...) or one captured earlier. A variable
// that is a whole JSON string becomes the variable's JSON value; one inside
// a longer string, its text.
package scenario
