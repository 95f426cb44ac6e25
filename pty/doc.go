// Package pty runs the worker's login pseudo-terminals and duplex channels
// on Daytona PTYs.
//
// A login PTY runs one of three fixed login commands (claude, codex, grok)
// on a 120×30 terminal; its output is decoded as streaming UTF-8 text. A
// duplex channel runs a caller's argv on a raw-mode terminal and carries
// every byte value both ways, undecoded. Both are reached through a
// Manager, which keeps them by the host's route id and the session id it
// mints, and follows the rules that keep a Paperclip host from retiring the
// worker: nothing is emitted for a session before its open has been answered
// (Opening.Start), nothing for a route the host has closed, a close is always
// acknowledged with the session it bound (remembered, boundedly, after the
// session is gone), and a session that failed to open never emits at all.
//
// The package knows Daytona through package daytona and nothing of the host:
// output and exits go to a Sink, which the worker turns into notifications.
// A Sink that blocks slows the terminal down (each session buffers a bounded
// amount, then stops reading its PTY socket), so memory stays bounded when
// the host reads slowly.
package pty
