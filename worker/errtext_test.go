package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
)

// TestErrText: the host reads the Daytona client's errors as the Node
// plugin showed them: the API's message (axios' when there is none), Node's
// network wording, the SDK's sentences, and a word the host's transient
// classifier retries on where the status or failure is worth a retry.
func TestErrText(t *testing.T) {
	t.Parallel()
	transport := func(err error) *daytona.TransportError {
		return &daytona.TransportError{Method: "GET", URL: "http://h/api/sandbox/x", Err: err}
	}
	started := []daytona.SandboxState{daytona.StateStarted}
	stopped := []daytona.SandboxState{daytona.StateStopped, daytona.StateDestroyed}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
		Err: &net.OpError{Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&daytona.APIError{StatusCode: 404, Message: "Sandbox with ID or name x not found"}, "Sandbox with ID or name x not found"},
		{&daytona.APIError{StatusCode: 401, Message: "Invalid credentials"}, "Invalid credentials"},
		{&daytona.APIError{StatusCode: 404}, "Request failed with status code 404"},
		{&daytona.APIError{StatusCode: 429, Message: "Rate limit exceeded"}, "Rate limit exceeded"},
		{&daytona.APIError{StatusCode: 429, Message: "Slow down"}, "Slow down (Daytona rate limit)"},
		{&daytona.APIError{StatusCode: 408, Message: "took too long"}, "took too long (Daytona timed out)"},
		{&daytona.APIError{StatusCode: 504, Message: "upstream timed out"}, "upstream timed out"},
		{&daytona.APIError{StatusCode: 502}, "Request failed with status code 502 (Daytona service unavailable)"},
		{&daytona.APIError{StatusCode: 503, Message: "Temporary authentication service error"}, "Temporary authentication service error (Daytona service unavailable)"},
		{&daytona.APIError{StatusCode: 500, Message: `{"detail":{"x":1}}`}, `{"detail":{"x":1}} (Daytona service unavailable)`},
		{&daytona.APIError{StatusCode: 500, Message: "partial", Cut: true}, "stream has been aborted (Daytona service unavailable)"},
		{&daytona.APIError{StatusCode: 400, Message: "partial", Cut: true}, "stream has been aborted"},

		{transport(refused), "connect ECONNREFUSED 127.0.0.1:9 (Daytona network error)"},
		{transport(context.DeadlineExceeded), "HTTP request timed out waiting for a response. This is a client-side deadline (DaytonaConfig.requestTimeoutMs, or the per-call operation/execution timeout); any operation already started on the server may still be running."},
		{&daytona.TransportError{Err: context.DeadlineExceeded, Deadline: 4999 * time.Millisecond}, "HTTP request timed out after 5000ms waiting for a response. This is a client-side deadline (DaytonaConfig.requestTimeoutMs, or the per-call operation/execution timeout); any operation already started on the server may still be running."},
		{transport(context.Canceled), "canceled"},
		{transport(io.ErrUnexpectedEOF), "socket hang up (Daytona network error)"},
		{transport(io.EOF), "socket hang up (Daytona network error)"},
		{transport(syscall.ECONNRESET), "read ECONNRESET (Daytona network error)"},
		{transport(syscall.EPIPE), "write EPIPE (Daytona network error)"},
		{transport(&net.DNSError{Name: "nowhere.invalid", IsNotFound: true}), "getaddrinfo ENOTFOUND nowhere.invalid (Daytona network error)"},
		{transport(&net.DNSError{Name: "flaky.invalid", IsTemporary: true}), "getaddrinfo EAI_AGAIN flaky.invalid (Daytona network error)"},
		{transport(fmt.Errorf("%w: %w", daytona.ErrResponseCut, io.ErrUnexpectedEOF)), "stream has been aborted (Daytona network error)"},
		{transport(errors.New("tls: first record does not look like a TLS handshake")), "tls: first record does not look like a TLS handshake (Daytona network error)"},

		{&daytona.WaitTimeoutError{SandboxID: "s", Target: started}, "Sandbox failed to become ready within the timeout period"},
		{&daytona.WaitTimeoutError{SandboxID: "s", Target: stopped}, "Sandbox failed to become stopped within the timeout period"},
		{&daytona.WaitTimeoutError{SandboxID: "s", Target: []daytona.SandboxState{daytona.StateDestroyed}}, "Sandbox failed to be destroyed within the timeout period"},
		{&daytona.WaitTimeoutError{SandboxID: "s", Target: []daytona.SandboxState{daytona.StateArchived}}, "Sandbox failed to reach archived within the timeout period"},
		{&daytona.SandboxStateError{SandboxID: "s", State: daytona.StateError, Reason: "disk full", Target: started}, "Sandbox s failed to start with status: error, error reason: disk full"},
		{&daytona.SandboxStateError{SandboxID: "s", State: daytona.StateBuildFailed, Target: started}, "Sandbox s failed to start with status: build_failed, error reason: undefined"},
		{&daytona.SandboxStateError{SandboxID: "s", State: daytona.StateError, Reason: "r", Target: stopped}, "Sandbox failed to stop with status: error, error reason: r"},
		{&daytona.SandboxStateError{SandboxID: "s", State: daytona.StateError, Reason: "r", Target: []daytona.SandboxState{daytona.StateDestroyed}}, "Sandbox s failed to delete with state: error, error reason: r"},

		{&daytona.SchemeError{Scheme: "ftp"}, "Unsupported protocol ftp:"},
		{&daytona.InvalidArgumentError{Arg: "language", Value: "ruby", Message: "x"}, "Invalid code-toolbox-language: ruby. Supported languages: python, typescript, javascript"},
		{&daytona.InvalidArgumentError{Arg: "ttlMinutes", Value: "-1", Message: "x"}, "ttlMinutes must be a non-negative integer"},
		{&daytona.InvalidArgumentError{Message: "daytona: create: set either Image or Snapshot, not both"}, "daytona: create: set either Image or Snapshot, not both"},
		{errors.New("the worker's own words"), "the worker's own words"},
	} {
		if got := errText(tc.err); got != tc.want {
			t.Errorf("errText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestErrTextOfTransientFailures: every failure worth a retry is worded so
// that the host's classifier retries it.
func TestErrTextOfTransientFailures(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&daytona.APIError{StatusCode: 429},
		&daytona.APIError{StatusCode: 502},
		&daytona.APIError{StatusCode: 503, Message: "down"},
		&daytona.APIError{StatusCode: 504},
		&daytona.APIError{StatusCode: 408},
		&daytona.TransportError{Err: context.DeadlineExceeded},
		&daytona.TransportError{Err: errors.New("read: connection reset by peer")},
		&daytona.TransportError{Err: syscall.ECONNREFUSED},
		&daytona.WaitTimeoutError{Target: []daytona.SandboxState{daytona.StateStarted}},
	} {
		if !daytona.IsTransient(err) && !errors.Is(err, daytona.ErrTimeout) {
			t.Errorf("%v is not transient to the client", err)
		}
		if msg := errText(err); !hostTransient(msg) {
			t.Errorf("%q would not be retried by the host", msg)
		}
	}
}

// TestErrTextThroughWrappers: an error the worker composes around a Daytona
// error reads with the Daytona error's host wording and still matches it,
// and a handler's error reaches the host so worded.
func TestErrTextThroughWrappers(t *testing.T) {
	t.Parallel()
	inner := &daytona.APIError{StatusCode: 404}
	wrapped := withText("delete Daytona session s: "+errText(inner), inner)
	if got, want := wrapped.Error(), "delete Daytona session s: Request failed with status code 404"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(wrapped, daytona.ErrNotFound) {
		t.Error("the wrapper does not match the error it wraps")
	}
	host := hostError(&notDispatched{inner})
	if got, want := host.Error(), "Request failed with status code 404"; got != want {
		t.Errorf("hostError = %q, want %q", got, want)
	}
	var ae *daytona.APIError
	if !errors.As(host, &ae) || ae != inner {
		t.Error("hostError hides the error it words")
	}
	if hostError(nil) != nil {
		t.Error("hostError(nil) is an error")
	}
}

func TestFileErrText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		// The daemon's message as it is: no word for the host's classifier.
		{&daytona.APIError{StatusCode: 500, Message: "disk on fire"}, "disk on fire"},
		{&daytona.APIError{StatusCode: 500}, "Request failed with status code 500"},
		{fmt.Errorf("daytona: download /x: %w", daytona.ErrNoFileData), "No data received for this file"},
		{errors.New("no response returned"), "no response returned"},
	} {
		if got := fileErrText(tc.err); got != tc.want {
			t.Errorf("fileErrText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
