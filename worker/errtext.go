package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
)

// This file is the one place that words the Daytona client's errors for the
// host. The client says what happened in REST terms; the Node plugin passed
// on what its SDK made of the same failure (the API's message, axios' and
// Node's network wording, the SDK's own sentences), and the host must read
// the same. Packages that compose host messages around the client's errors
// (sync, pty) are given these functions rather than wording them again.

// errText is the message the host reads for err. Only err itself is worded
// here, not what it wraps: an error of the worker's that wraps a Daytona
// error composes its message with errText (see withText).
func errText(err error) string {
	switch e := err.(type) {
	case *daytona.APIError:
		msg := sdkMessage(e)
		return msg + transientHint(e.StatusCode, msg)
	case *daytona.TransportError:
		msg := networkMessage(e)
		if errors.Is(e.Err, context.Canceled) || hostTransient(msg) {
			return msg
		}
		return msg + " (Daytona network error)"
	case *daytona.WaitTimeoutError:
		return "Sandbox failed to " + waitVerb(e.Target) + " within the timeout period"
	case *daytona.SandboxStateError:
		return sandboxStateText(e)
	case *daytona.SchemeError:
		return "Unsupported protocol " + e.Scheme + ":"
	case *daytona.InvalidArgumentError:
		return invalidArgumentText(e)
	}
	return err.Error()
}

// fileErrText is a per-file download failure as the SDK words it: the
// daemon's message with no word added, or the SDK's sentence for a file that
// got no data.
func fileErrText(err error) string {
	var ae *daytona.APIError
	switch {
	case errors.As(err, &ae):
		return sdkMessage(ae)
	case errors.Is(err, daytona.ErrNoFileData):
		return "No data received for this file"
	}
	return errText(err)
}

// textError is an error whose message the worker composed, usually around
// errText of the errors it wraps; errors.Is and errors.As still reach them.
type textError struct {
	text string
	errs []error
}

func (e *textError) Error() string   { return e.text }
func (e *textError) Unwrap() []error { return e.errs }

// withText is an error that reads text and wraps errs.
func withText(text string, errs ...error) error { return &textError{text: text, errs: errs} }

// hostError is a handler's error as the host receives it: worded by errText,
// still matching what it wraps.
func hostError(err error) error {
	if err == nil {
		return nil
	}
	return withText(errText(err), err)
}

// sdkMessage is the message of the SDK's error for a refused request: the
// API's own, axios' for a body that said nothing, and axios' for a body cut
// short whatever it held.
func sdkMessage(e *daytona.APIError) string {
	switch {
	case e.Cut:
		return msgBodyAborted
	case e.Message == "":
		return "Request failed with status code " + strconv.Itoa(e.StatusCode)
	}
	return e.Message
}

// msgBodyAborted is axios' message for a response whose connection was lost
// after its headers, before the end of its body.
const msgBodyAborted = "stream has been aborted"

// transientWords is the host's transient classifier: a message matching it
// is retried.
var transientWords = regexp.MustCompile(`(?i)\b(timeout|timed out|rate limit|temporar|network|connection reset|service unavailable)\b`)

// hostTransient reports whether the host would retry an error with message
// msg as transient.
func hostTransient(msg string) bool { return transientWords.MatchString(msg) }

// transientHint is the word appended to the message of a status worth
// retrying, when the message lacks one: the Node worker passes such errors
// through without it, and the host then gives up on a lease it could have
// resumed (differences row transient-error-wording).
func transientHint(status int, msg string) string {
	var word string
	switch {
	case status == http.StatusTooManyRequests:
		word = "rate limit"
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		word = "timed out"
	case status >= 500:
		word = "service unavailable"
	default:
		return ""
	}
	if hostTransient(msg) {
		return ""
	}
	return " (Daytona " + word + ")"
}

// networkMessage words a request that got no answer as Node's HTTP client
// (through axios and the SDK) words it.
func networkMessage(e *daytona.TransportError) string {
	err := e.Err
	var dnsErr *net.DNSError
	var opErr *net.OpError
	addr := ""
	if errors.As(err, &opErr) && opErr.Addr != nil {
		addr = " " + opErr.Addr.String()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		return clientDeadlineMessage(e.Deadline)
	case errors.Is(err, daytona.ErrResponseCut):
		return msgBodyAborted
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "getaddrinfo ENOTFOUND " + dnsErr.Name
		}
		return "getaddrinfo EAI_AGAIN " + dnsErr.Name
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connect ECONNREFUSED" + addr
	case errors.Is(err, syscall.ENETUNREACH):
		return "connect ENETUNREACH" + addr
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "connect EHOSTUNREACH" + addr
	case errors.Is(err, syscall.ECONNRESET):
		return "read ECONNRESET"
	case errors.Is(err, syscall.EPIPE):
		return "write EPIPE"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "socket hang up"
	}
	return err.Error()
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// clientDeadlineMessage is the SDK's message for a request whose deadline
// passed before the response came; the deadline is given in whole seconds'
// worth of milliseconds, as the SDK's per-call timeouts are.
func clientDeadlineMessage(deadline time.Duration) string {
	after := ""
	if deadline > 0 {
		ms := (deadline + time.Second - 1).Truncate(time.Second).Milliseconds()
		after = " after " + strconv.FormatInt(ms, 10) + "ms"
	}
	return "HTTP request timed out" + after + " waiting for a response. This is a client-side deadline" +
		" (DaytonaConfig.requestTimeoutMs, or the per-call operation/execution timeout); any operation" +
		" already started on the server may still be running."
}

// invalidArgumentText is the SDK's refusal of a create parameter it checks
// before sending anything.
func invalidArgumentText(e *daytona.InvalidArgumentError) string {
	switch e.Arg {
	case "language":
		return fmt.Sprintf("Invalid %s: %s. Supported languages: %s", daytona.LanguageLabel, e.Value, strings.Join(daytona.Languages, ", "))
	case "autoStopInterval", "autoArchiveInterval", "ttlMinutes":
		return e.Arg + " must be a non-negative integer"
	}
	return e.Error()
}

// waitVerb is how the SDK names reaching targets in its timeout messages.
func waitVerb(targets []daytona.SandboxState) string {
	switch {
	case slices.Equal(targets, []daytona.SandboxState{daytona.StateStarted}):
		return "become ready"
	case slices.Contains(targets, daytona.StateStopped):
		return "become stopped"
	case slices.Equal(targets, []daytona.SandboxState{daytona.StateDestroyed}):
		return "be destroyed"
	}
	return "reach " + joinStates(targets)
}

// sandboxStateText is the SDK's message for a wait that ended in error or
// build_failed; an absent reason reads "undefined", as JavaScript's template
// string renders it.
func sandboxStateText(e *daytona.SandboxStateError) string {
	reason := e.Reason
	if reason == "" {
		reason = "undefined"
	}
	switch {
	case slices.Equal(e.Target, []daytona.SandboxState{daytona.StateStarted}):
		return fmt.Sprintf("Sandbox %s failed to start with status: %s, error reason: %s", e.SandboxID, e.State, reason)
	case slices.Contains(e.Target, daytona.StateStopped):
		return fmt.Sprintf("Sandbox failed to stop with status: %s, error reason: %s", e.State, reason)
	case slices.Equal(e.Target, []daytona.SandboxState{daytona.StateDestroyed}):
		return fmt.Sprintf("Sandbox %s failed to delete with state: %s, error reason: %s", e.SandboxID, e.State, reason)
	}
	return fmt.Sprintf("Sandbox %s failed with state: %s", e.SandboxID, e.State)
}

func joinStates(states []daytona.SandboxState) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = string(s)
	}
	return strings.Join(parts, "|")
}
