package pty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/paperclipai/daytona-worker/daytona"
)

// ErrEmptyCommand is the reference plugin's error for an empty argv.
var ErrEmptyCommand = errors.New("The duplex channel launch command needs at least one argument.")

// maxLaunchLine bounds the wrapper line: the shell may still be starting
// when it arrives, and the terminal then holds typed-ahead input in its
// canonical-mode line buffer, which keeps 4,095 bytes.
const maxLaunchLine = 4000

// DiagnosticsPath is where a duplex channel's stderr goes in the sandbox.
func DiagnosticsPath(uid string) string { return "/tmp/paperclip-duplex-" + uid + ".log" }

// duplexPTYPrefix starts the ID of a duplex channel's PTY session; the rest
// is the uid of its DiagnosticsPath.
const duplexPTYPrefix = "paperclip-duplex-"

// DiagnosticsPathOfPTY is the diagnostics file of the duplex channel whose
// PTY session is ptyID (ok is false for any other PTY), for tools that run
// sandboxes on this machine and remove what those sessions left in /tmp.
func DiagnosticsPathOfPTY(ptyID string) (path string, ok bool) {
	uid, ok := strings.CutPrefix(ptyID, duplexPTYPrefix)
	if !ok {
		return "", false
	}
	return DiagnosticsPath(uid), true
}

// RemoveDiagnostics removes the diagnostics files of the duplex channels
// among ptyIDs, for tools and tests whose sandboxes run on this machine and
// share its /tmp: the file outlives its channel, as it does in a real
// sandbox, also when the channel's open failed.
func RemoveDiagnostics(ptyIDs []string) {
	for _, id := range ptyIDs {
		if path, ok := DiagnosticsPathOfPTY(id); ok {
			_ = os.Remove(path)
		}
	}
}

// shellQuote makes s one single-quoted shell word ('"'"' for a quote), as the
// reference's duplex wrapper does.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// readyToken is what the wrapper prints, inside an OSC sequence, once the
// terminal is raw: everything before it is the shell's (its prompt and the
// echo of the wrapper line) and is dropped; everything after it is the
// command's.
func readyToken(uid string) string { return "paperclip-duplex-ready;" + uid }

// readyMarker is the bytes the wrapper's printf produces. The typed line's
// echo cannot contain them: there the ESC is the four characters \033, and
// the token is an argument of its own.
func readyMarker(uid string) []byte { return []byte("\x1b]" + readyToken(uid) + "\x07") }

// LaunchWrapper is the line typed into a duplex channel's shell (without
// the Enter): stderr to the diagnostics file, the terminal raw with no
// echo, the ready marker, then exec of the command, each argv element one
// quoted word. A command that cannot be executed ends the shell with 127
// instead of leaving it to read the host's bytes as commands.
func LaunchWrapper(command []string, diagnosticsPath, uid string) (string, error) {
	if len(command) == 0 {
		return "", ErrEmptyCommand
	}
	var b strings.Builder
	b.WriteString("exec 2>" + shellQuote(diagnosticsPath) + "; stty raw -echo; printf '\\033]%s\\007' " + shellQuote(readyToken(uid)) + "; exec")
	for i, arg := range command {
		for _, c := range []byte(arg) {
			if c < 0x20 || c == 0x7f {
				// The shell reads the line through its line editor, which
				// would act on the control character instead of passing it.
				return "", fmt.Errorf("The duplex channel launch command's argument %d holds the control character %q, which the sandbox shell would act on while reading the line.", i, string(c))
			}
		}
		b.WriteByte(' ')
		b.WriteString(shellQuote(arg))
	}
	b.WriteString("; exit 127")
	if b.Len() > maxLaunchLine {
		return "", fmt.Errorf("The duplex channel launch command is too long: its launch line takes %d bytes, more than the %d a terminal reads in one line.", b.Len(), maxLaunchLine)
	}
	return b.String(), nil
}

// launchFilter drops a duplex terminal's output up to and including the
// ready marker, then passes everything on. It runs on the socket's reader.
type launchFilter struct {
	marker []byte
	next   *outbox
	ready  chan struct{} // closed when the marker has been seen
	found  bool
	tail   []byte // the end of what was dropped, where a marker may begin
}

func newLaunchFilter(marker []byte, next *outbox) *launchFilter {
	return &launchFilter{marker: marker, next: next, ready: make(chan struct{})}
}

func (f *launchFilter) Write(p []byte) (int, error) {
	if f.found {
		return f.next.Write(p)
	}
	buf := append(f.tail, p...)
	i := bytes.Index(buf, f.marker)
	if i < 0 {
		keep := min(len(buf), len(f.marker)-1)
		f.tail = append(f.tail[:0:0], buf[len(buf)-keep:]...)
		return len(p), nil
	}
	f.found, f.tail = true, nil
	close(f.ready)
	if rest := buf[i+len(f.marker):]; len(rest) > 0 {
		if _, err := f.next.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// DuplexRequest opens a duplex channel.
type DuplexRequest struct {
	HostRouteID     string
	ProviderLeaseID string   // the lease the channel lives on (closed with it)
	Command         []string // argv; element 0 is the program
}

// OpenDuplex opens a raw 120×30 PTY on tb's sandbox running the command,
// and returns once the terminal is raw and the command is being executed,
// so every byte written from then on reaches the command unchanged. The
// channel emits nothing until Start.
func (m *Manager) OpenDuplex(ctx context.Context, tb *daytona.Toolbox, req DuplexRequest) (*Opening, error) {
	// Checked before anything is registered, with a UUID's length.
	if _, err := LaunchWrapper(req.Command, DiagnosticsPath(placeholderUID), placeholderUID); err != nil {
		return nil, err
	}
	s, err := m.register(false, req.HostRouteID, req.ProviderLeaseID)
	if err != nil {
		return nil, err
	}
	wrapper, err := LaunchWrapper(req.Command, DiagnosticsPath(s.uid), s.uid)
	if err != nil {
		m.abandon(s)
		return nil, err
	}
	filter := newLaunchFilter(readyMarker(s.uid), s.out)
	return m.open(ctx, s, func(ctx context.Context) error {
		term, err := openTerminal(ctx, tb, s.ptyID, filter)
		if err != nil {
			return err
		}
		if !s.setTerm(term) {
			return errClosedWhileOpening
		}
		if err := term.send(ctx, []byte(wrapper+"\r")); err != nil {
			select {
			case <-term.done():
				// The shell ended before it took the launch line: the same
				// end as below, whichever the send or the close came first.
				return errEndedBeforeCommand
			default:
				return err
			}
		}
		select {
		case <-filter.ready:
			return nil
		case <-term.done():
			return startedOrEnded(filter.ready)
		case <-ctx.Done():
			return fmt.Errorf("Daytona duplex channel: the terminal did not reach raw mode: %w", ctx.Err())
		}
	})
}

const placeholderUID = "00000000-0000-0000-0000-000000000000"

var errEndedBeforeCommand = errors.New("Daytona duplex channel: the terminal ended before the command started")

// startedOrEnded decides an open whose terminal has ended. A quick command
// prints the ready marker and ends before the open looks: both channels are
// then closed and select picks either, but the marker, written before the
// end by the same reader, means the command did start.
func startedOrEnded(ready <-chan struct{}) error {
	select {
	case <-ready:
		return nil
	default:
		return errEndedBeforeCommand
	}
}

// duplexSession finds the live channel of the exact pair; nil without error
// when that pair was closed.
func (m *Manager) duplexSession(r Route) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.duplexes[r.HostRouteID]; s != nil && s.route.SessionID == r.SessionID {
		return s, nil
	}
	if sid, ok := m.closedDuplexRoute(r.HostRouteID); ok && sid == r.SessionID {
		return nil, nil
	}
	return nil, fmt.Errorf("Daytona duplex channel: route %q with session %q is %w", r.HostRouteID, r.SessionID, ErrNotOpen)
}

// DuplexWrite writes bytes to the channel of the exact pair, in order with
// earlier writes; for any other pair nothing is written.
func (m *Manager) DuplexWrite(ctx context.Context, r Route, data []byte) error {
	s, err := m.duplexSession(r)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("Daytona duplex channel: session %q %w; the bytes were not written", r.SessionID, ErrEnded)
	}
	return s.input(ctx, data)
}

// DuplexStop kills the process of the exact pair's channel; its exit
// follows as usual. A closed channel is stopped already.
func (m *Manager) DuplexStop(ctx context.Context, r Route) error {
	s, err := m.duplexSession(r)
	if err != nil || s == nil {
		return err
	}
	return s.stop(ctx)
}

// DuplexClose closes a route's channel (killing its process in the
// background) and returns the session it bound, remembered after the
// channel is gone; "" when the route never bound one.
func (m *Manager) DuplexClose(hostRouteID string) string {
	m.mu.Lock()
	s := m.duplexes[hostRouteID]
	if s == nil {
		sid, known := m.closedDuplexRoute(hostRouteID)
		if !known {
			// Closed before its open was handled: the open must not go live.
			m.closedOther.put(hostRouteID, "")
		}
		m.mu.Unlock()
		return sid
	}
	m.forgetLocked(s)
	shut := m.shut
	m.mu.Unlock()
	if !shut {
		// Once Close has begun it has silenced every session and is
		// ending it; the close only has to be acknowledged.
		s.silence()
	}
	return s.route.SessionID
}
