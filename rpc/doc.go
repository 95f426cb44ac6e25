// Package rpc is the worker's JSON-RPC 2.0 transport: newline-delimited JSON
// on stdin/stdout, built on github.com/sourcegraph/jsonrpc2.
//
// The library's Conn runs the read loop and keeps the table of pending
// worker→host calls. Everything the library gets wrong for a Paperclip worker
// is done here instead:
//
//   - Framing: our own line stream, with no line-size limit short of memory.
//     The stock stream closes the connection on the first malformed line; ours
//     answers it with a -32700 error (id null) and keeps reading.
//   - Classification: messages are classified exactly as the Paperclip SDK's
//     type guards do (response, then request, then notification), with the
//     same parse errors for a non-object or a wrong "jsonrpc" member.
//   - Requests: the stream hands each request from the host to the Conn
//     itself, parsed once (the line checked, then split into its members),
//     with its id kept as raw JSON so the reply echoes it with its exact
//     JSON type; the library, which only knows unsigned integer and string
//     ids and would decode a re-encoded copy of each request, sees only the
//     responses to the worker's own calls.
//   - Output: replies and notifications are written by this package, in the
//     Node worker's key order, with "result":null for void results, never an
//     id on a notification, one message per write so lines never interleave,
//     and streamed encoding for large results. A message that cannot be
//     encoded costs only itself: a reply becomes a -32002 error, a
//     notification's error goes back to its caller, and a line already
//     partly sent is ended so the host's line reader stays in step. Only a
//     failed write to stdout stops the output for good.
//   - Concurrency: every request runs in its own goroutine, owned by the Conn;
//     panics (in a handler or while encoding its result) are recovered and
//     answered as -32002; shutdown stops admission (but for the requests a
//     ShutdownAnswerer names, such as terminal closes the host must see
//     acknowledged), waits (bounded) for in-flight handlers, then replies.
//     A handler that implements Serializer has the requests it keys alike
//     (the writes to one terminal) run one at a time in arrival order;
//     AfterReply runs work once a reply is on the wire (a terminal's output,
//     which must follow the reply that names it).
//   - Invocations: the request's paperclipInvocation travels in the handler's
//     context, and every notification or call made with that context carries
//     "paperclipInvocationId".
package rpc
