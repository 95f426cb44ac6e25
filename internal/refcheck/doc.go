// Package refcheck plays the same host scenarios through the Node reference
// worker and through daytona-worker, each against a Daytona emulator of its
// own, and compares what each writes back once volatile values (ids, times,
// paths, ports, durations) are normalised. Every scenario comes out
// identical, documented (every difference is one a row of differences.txt
// names) or different. `make refcheck` runs it (cmd/refcheck).
//
// A scenario is a file under testdata/refcheck in the scenario format of
// internal/scenario (its package doc has the steps and options), with no
// expectations: each step's output (a host request's lines up to its
// reply, a host notification's or a raw line's until quiet, what the
// workers write after close_stdin until they exit, then {"exit": code}, a
// sandboxes or files line) is collected from both workers and compared. The
// sync scenarios of testdata/refcheck-sync are kept apart: they compare real
// syncs, which the reference copy `make refcheck` sets up cannot make (its
// file-sync module is a stand-in, row reference-copy-stubs); play them
// against a copy that has the plugin's module with
// `bin/refcheck -scenarios testdata/refcheck-sync -reference "node DIR/worker.mjs"`.
// Their differs name the rows that apply then; played through
// daytona-worker on both sides they come out identical
// (TestSameWorkerOnBothSidesIsIdentical plays one of them).
//
// Hooks act on each side's emulator: `fault {...}` (method, path,
// sandboxId, times, latency_ms, status, body, empty_body, hang, reset,
// reset_after_bytes, retry_after, drop_websocket_after_bytes, command: the
// fields of emulator.Fault), clear-faults, stop ID, delete ID,
// `set-error {"id": ID, "reason": "…", "recoverable": false}`,
// missing-container ID. A files step lists a folder of this machine (a
// sandbox's, e.g. "${CWD}/x", or one in "${HOST_DIR}"): every path below
// it ("." for itself), sorted, with its type, octal mode, and a file's size
// and sha256 or a link's target (no times, no owners);
// {"files": null, "error": …} when it is missing or not a folder.
//
// "${NAME}" in a step is replaced by a variable: DAYTONA_API_URL,
// DAYTONA_API_KEY, EMULATOR_URL, CLOSED_API_URL (nothing listens there),
// HOST_DIR (an empty scratch folder of the side's own, removed after the
// scenario: host paths of syncs and files steps, so that the two sides
// never share a host file), CFG (a config object with the key and the URL;
// as a whole JSON string it becomes the object), or one captured earlier.
//
// Normalisation, applied to both sides alike: the side's API URL, emulator
// root folder, host folder, closed URL and API key become their variable
// names; UUIDs become "<uuid>", ISO times "<iso8601>", the emulator's
// 32-character SSH and preview tokens "<token>", the numbers under
// durationMs and getDurationMs, a span.record's startTimeMs and endTimeMs
// and its *.wall_ms attributes "<ms>", a 64-hex generation (a digest of the
// side's sandbox id) "<hex64>", the random end of a template capture's
// fallback name (templateRef "paperclip-<environmentId>-<hex8>"); runs of
// execute.log notifications of one invocation are joined into one per
// stream (stdout first), so chunking does not count.
package refcheck
