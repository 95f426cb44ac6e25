// Package emulator is a local Daytona: the control plane (/api/...), the
// per-sandbox toolbox (/toolbox/{sandboxId}/...) and PTY WebSockets on one
// http.Handler, with sandboxes that are real folders and commands that are
// real processes. It exists so the daytona client and the worker can be
// tested end to end without the network, and so client mistakes show up:
// wire types are its own (it never imports the client), shapes and status
// codes follow @daytonaio/api-client 0.220.0, @daytona/toolbox-api-client
// 0.218.0 and the daemon, and unknown routes answer a loud 404 naming the route.
//
// # Use
//
// In tests, emulatortest.Start(t, emulator.Options{}) gives an httptest server,
// its APIURL (…/api) and APIKey, and closes everything on cleanup. Elsewhere,
// New(Options) returns a *Server (an http.Handler); Close kills every sandbox
// process and removes a root it created. The daytona-emulator command serves
// one on a port and prints DAYTONA_API_URL=http://HOST:PORT/api first.
//
// Auth: every route wants "Authorization: Bearer <key>" (Options.APIKey, by
// default DevAPIKey = "daytona-emulator-dev-key", a public development value).
// Toolbox routes also take the sandbox's preview token in
// X-Daytona-Preview-Token or ?DAYTONA_SANDBOX_AUTH_KEY=, as the proxy does.
// Failures are 401 with the control plane's NestJS body on /api and the
// daemon's common-go body on /toolbox. GET /api/config is public.
//
// # Sandboxes
//
// Each sandbox is a folder Root/sandboxes/<id> with a home (also the work
// dir) at home/<user>; /work-dir and /user-home-dir return its absolute path.
// The daemon's own files (session logs, command files) live in daemon/,
// outside the home. Processes get a clean environment: the host's PATH and
// locale, HOME = the sandbox home, USER, DAYTONA_SANDBOX_ID, the create-time
// env, POST /env changes, then per-call envs. Files the file API creates
// outside the sandbox folder (e.g. /tmp/x, which sandboxes share with the
// host) are removed when the sandbox is deleted.
//
// Lifecycle follows the real (stored state, desired state) model and its
// derived `state`: create → creating → started (image builds:
// building_snapshot → starting → started), stop → stopping → stopped, archive →
// archiving → archived, start from archived → restoring → started, snapshot
// (of a started or stopped sandbox) → snapshotting → back to its state, and
// only then the snapshot, active, as the real job handler orders it; delete → destroying → gone (GET 404). Each step
// lasts Options.StepDelay (archiving lasts Options.ArchiveDelay), in real time
// or, with Options.ClockTimers, on the emulator's clock, as do ExitCodeDelay
// faults and /process/execute timeouts. Create, start and recover hold the response until
// started (≤30 s) like the real controller, unless Options.ReturnTransitional.
// Stop kills every process (sessions, PTYs, running commands) but keeps files;
// start brings the sandbox back with its files. A transition in progress makes
// lifecycle calls answer 409 (but a start or a delete of a sandbox being
// archived goes through, as in the real API); invalid ones answer 400 with the real messages
// ("Sandbox is not in a stoppable state", "Sandbox is not stopped", "Sandbox is
// not in valid state", "Sandbox is in an errored state", "Sandbox is not in a
// recoverable state"). Ephemeral sandboxes (autoDeleteInterval 0) are deleted
// by stop. POST …/ttl/{minutes} sets autoDestroyAt from now (0 clears it);
// when it passes, the sandbox is destroyed whatever its state. Auto-stop,
// auto-archive and auto-delete run on the emulator's clock (Options.Clock
// plus AdvanceClock), checked before every request, every
// Options.ReapInterval and on Reap. Snapshots taken from a sandbox copy its
// home; sandboxes created from them start with those files. General snapshots
// daytona-small, daytona-medium and daytona-large always exist.
//
// # Toolbox
//
// Every process (execute shell, session shell, PTY shell) leads its own
// session; stops, timeouts, deletes and Close SIGKILL the whole session, and
// a leader is only reaped once its session is empty, so a PID is never
// signalled after it could have been reused.
//
// /process/execute pipes the command to the shell's stdin (bash, else sh),
// stdout and stderr interleaved; `timeout` seconds kills the session and
// answers 408 REQUEST_TIMEOUT. As on the daemon, a background job that keeps
// stdout open holds the reply. Sessions are persistent
// shells: each command is sourced, so cd/export persist; output lines are
// logged with the \x01\x01\x01 (stdout) / \x02\x02\x02 (stderr) markers; async
// exec answers 202 {cmdId} and takes /input. Logs come back as JSON
// {output,stdout,stderr} for X-Daytona-SDK-Version ≥ 0.167.0, text otherwise,
// or over a WebSocket (?follow=true) replayed from the start, cut into binary
// frames of Options.LogFrameSize bytes and further by Options.LogFrameSplit
// (the frames of one file read reach the kernel in one write, as they would
// behind the daemon's proxy), closed 1000 after the exit code exists. PTYs are real pseudo-terminals
// running `<shell> -i -l` (creack/pty), on /process/pty/{id}/connect and the
// SDK's /process/pty/create-connect: text {"type":"control","status":"connected"}
// first, binary output, input frames written verbatim (64 KiB limit), close
// 1000 {"exitCode":0} or 1011 {"exitCode":N,"exitReason":…}; DELETE closes
// clients with 1011 {"exitCode":137,"exitReason":"SIGKILL"}.
//
// # Faults, state manipulation, introspection
//
// Go: AddFault (latency, status such as 429/503 with Retry-After, hangs,
// gates that hold requests until the test releases them, WebSocket drops
// mid-stream, a followed command log left silent and half-open after the
// command ends, an exit code published only a while after the command's log
// closed, execute replies for commands containing a text instead of running
// them, a connection reset (RST) after part of a real answer, a body sent
// slowly in small pieces, a proxy's HTML error page; scoped by method, path
// regexp, sandbox, command text and count; FaultHits lists what they hit),
// AddSnapshotFault (a snapshot job that is slow, fails silently as the real
// job handler lets it, or leaves the sandbox in error),
// StopBehindClientsBack, SetError, SetMissingContainer
// (MissingContainerReason), SetProcessEnv, AdvanceClock, Reap, Sandboxes,
// Sandbox, Snapshots, SSHAccess, LiveProcesses, Requests (counts per
// route), Record (every request of an operation, in order, with its route
// and sandbox), IssuedSecrets (every SSH and preview token handed out, so
// tests can prove none leaked), Journal (each sandbox's commands and file
// transfers, in order: what a client asked for).
//
// HTTP, same bearer key, JSON:
//
//	GET    /_emulator/sandboxes                        [SandboxView]
//	GET    /_emulator/pty-sessions                     [every PTY session ID created, in order]
//	GET    /_emulator/sandboxes/{idOrName}             SandboxView
//	POST   /_emulator/sandboxes/{idOrName}/stop        StopBehindClientsBack → 204
//	POST   /_emulator/sandboxes/{idOrName}/error       {"reason":"…","recoverable":false} → 204
//	POST   /_emulator/sandboxes/{idOrName}/missing-container   → 204
//	GET    /_emulator/faults                           [{"id":1,"method":"POST","path":"…","status":503,…}]
//	POST   /_emulator/faults                           {"method","path","sandboxId","times","latency":"250ms",
//	                                                    "status","body","retryAfter","hang",
//	                                                    "dropWebSocketAfterBytes","command",
//	                                                    "reply":{"exitCode","result"},"halfOpenAfterEnd",
//	                                                    "exitCodeDelay":"2s","reset","resetAfterBytes",
//	                                                    "slowBody":"50ms","slowBodyChunk"} → 201 {"id":N}
//	DELETE /_emulator/faults/{id}, DELETE /_emulator/faults   → 204
//	GET    /_emulator/requests                         {"POST /api/sandbox": 2, …}
//	DELETE /_emulator/requests                         → 204 (reset counters)
//	POST   /_emulator/reap                             run lifecycle timers now → 204
//	POST   /_emulator/clock                            {"advance":"90m"} → {"now":"…Z"}
//	GET    /_emulator/processes                        {"live":N}
//	POST   /_emulator/snapshot-faults                  {"sandboxId","times","hold":"3s",
//	                                                    "outcome":""|"fail"|"error","reason"} → 204
//	DELETE /_emulator/snapshot-faults                  → 204
//	GET    /_emulator/snapshots                        ["daytona-small", …]
//	GET    /_emulator/secrets                          every SSH/preview token issued so far
package emulator
