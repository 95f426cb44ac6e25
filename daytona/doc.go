// Package daytona is a hand-written client of the Daytona control-plane REST
// API and of the per-sandbox toolbox API (processes, sessions, files, PTYs),
// modelled on google/go-github: one request path, one status-to-error
// mapping, bounded error bodies, a context first on every call, and no
// credentials in errors.
//
// Paths and JSON fields follow the npm @daytonaio/api-client 0.220.0 and
// @daytonaio/toolbox-api-client 0.161.0; waits, retries, log demultiplexing
// and PTY close handling follow the TypeScript SDK 0.218.0.
//
// # Shape
//
// A Client (New) covers the control plane: Create, Get, List/ListAll,
// Start, Stop, Archive, Recover, Delete, the interval and TTL setters,
// labels, SSH access, preview links and snapshots. Lifecycle calls come in
// two forms: the raw call (Start) returns the server's reply, which may
// still be transitional; the waiting form (StartAndWait) then polls
// GET /sandbox/{id} like the SDKs — first after 100 ms, every 100 ms, and
// after 5 s growing by 10 % per poll up to 1 s — until the target state,
// the timeout argument (<= 0: none) or ctx ends. Waits fail with a
// *SandboxStateError on error/build_failed and a *WaitTimeoutError on time;
// a stop wait treats a vanished sandbox (404) as stopped. Stop and delete
// waits poll as the SDK's refreshDataSafe does: a poll Daytona answers with
// an error, or not at all, tells nothing and the wait polls on until its
// timeout; a start wait fails with such a poll's error.
//
// Client.Toolbox(sandbox) returns a Toolbox handle for the sandbox's
// toolbox, at <toolboxProxyUrl>/<sandboxId>: Execute, sessions (with
// FollowSessionCommandLogs over WebSocket), files (multipart uploads and
// downloads streamed through io.Reader/io.Writer) and PTYs (ConnectPty
// returns a PtyHandle).
//
// Every request, WebSocket handshakes included, carries
// "Authorization: Bearer <key>", X-Daytona-Source and X-Daytona-SDK-Version
// (>= 0.167.0, so that daemons return split stdout/stderr and marker-framed
// log streams).
//
// # Errors
//
// Errors speak REST, not any SDK's wording. A non-2xx response is an
// *APIError: the request (method and sanitized URL), the status, the body's
// code, and the API's own message (the JSON "message", then "error", then
// the raw body, bounded to 64 KiB; empty when the body says nothing). It
// matches the sentinels with errors.Is: ErrBadRequest 400, ErrUnauthorized
// 401, ErrForbidden 403, ErrNotFound 404, ErrTimeout 408 and 504,
// ErrConflict 409, ErrGone 410, ErrRateLimited 429 (RetryAfter parsed from
// Retry-After and Retry-After-{name}), ErrServer 5xx. A request without a
// response is a *TransportError wrapping the cause; a deadline there matches
// both ErrTimeout and context.DeadlineExceeded, a failure before anything
// was sent matches ErrNotSent, and a body lost midway matches
// ErrResponseCut. Wait timeouts (*WaitTimeoutError) match ErrTimeout and
// context.DeadlineExceeded; a 408 matches ErrTimeout only (the server gave
// up, not the caller). Dropped WebSocket streams are *StreamError values
// matching ErrStreamDropped. IsTransient tells which errors are worth
// retrying later. How a caller words these for its own users is its choice.
//
// No error text or log line carries the API key or a URL's user info,
// query values or fragment: URLs are rendered by one sanitizer, and
// net/http's *url.Error, which quotes the URL, is unwrapped where the
// client builds its errors.
//
// # Retries
//
// GET requests (and WebSocket handshakes) are retried on 429, 502, 503, 504
// and connection failures with jittered exponential back-off, honouring
// Retry-After, as long as the caller's deadline allows the wait (RetryPolicy).
// POST, PUT and DELETE are retried when the connection could not even be
// dialled; a POST that may have reached the server is never replayed, while a
// PUT or a DELETE (idempotent) whose connection was reset or closed before any
// answer is, as the SDK's connection retry does. No answer is retried for a
// mutation.
//
// # Concurrency
//
// Client and Toolbox are safe for concurrent use and keep no package-level
// state. No goroutine outlives the call that started it, except the reader
// of a PtyHandle, which Close stops.
package daytona
