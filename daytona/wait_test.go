package daytona

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineRecorder notes, for each sandbox GET, how much real time its
// context left it: a poll bounded by a context that ends at the wait's
// deadline cannot answer once the deadline has come.
type deadlineRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	left []time.Duration // -1: no deadline
}

func (d *deadlineRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		left := time.Duration(-1)
		if dl, ok := r.Context().Deadline(); ok {
			left = time.Until(dl)
		}
		d.mu.Lock()
		d.left = append(d.left, left)
		d.mu.Unlock()
	}
	return d.next.RoundTrip(r)
}

func (d *deadlineRecorder) Left() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Duration(nil), d.left...)
}

// recordDeadlines makes setup's client send through a deadlineRecorder.
func recordDeadlines(rec *deadlineRecorder) func(*Config) {
	return func(cfg *Config) {
		rec.next = cfg.HTTPClient.Transport
		cfg.HTTPClient = &http.Client{Transport: rec}
	}
}

// The action before a wait may use up the whole budget; the wait must still
// make the SDK's final refresh and report what it sees, with time to answer.
func TestAndWaitFinalRefreshAfterBudgetUsedUp(t *testing.T) {
	t.Parallel()
	const budget = 10 * time.Second
	cases := []struct {
		name   string
		action string // pattern of the request that takes the budget
		reply  SandboxState
		final  SandboxState // "404": the sandbox is gone
		call   func(*Client) error
	}{
		{"start", "POST /sandbox/sb/start", StateStarting, StateStarted, func(c *Client) error {
			_, err := c.StartAndWait(context.Background(), "sb", budget)
			return err
		}},
		{"recover", "POST /sandbox/sb/recover", StateStarting, StateStarted, func(c *Client) error {
			_, err := c.RecoverAndWait(context.Background(), "sb", budget)
			return err
		}},
		{"stop", "POST /sandbox/sb/stop", StateStopping, StateStopped, func(c *Client) error {
			_, err := c.StopAndWait(context.Background(), "sb", nil, budget)
			return err
		}},
		{"delete", "DELETE /sandbox/sb", StateDestroying, "404", func(c *Client) error {
			return c.DeleteAndWait(context.Background(), "sb", budget)
		}},
		{"snapshot", "POST /sandbox/sb/snapshot", StateSnapshotting, StateStarted, func(c *Client) error {
			_, err := c.CreateSnapshotFromSandboxAndWait(context.Background(), "sb", "snap", budget)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &deadlineRecorder{}
			c, mux, srv, clock := setup(t, recordDeadlines(rec))
			mux.HandleFunc(tc.action, func(w http.ResponseWriter, r *http.Request) {
				clock.Advance(budget + time.Second)
				writeJSON(w, 200, sandboxJSON(srv, "sb", tc.reply))
			})
			polls := lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }, tc.final)
			if err := tc.call(c); err != nil {
				t.Fatalf("err = %v; the final refresh would have seen %s", err, tc.final)
			}
			if polls.Load() != 1 {
				t.Errorf("polls = %d, want the one final refresh", polls.Load())
			}
			for _, left := range rec.Left() {
				if left >= 0 && left < waitRefreshBound/2 {
					t.Errorf("the final refresh had %v to answer, want about %v", left, waitRefreshBound)
				}
			}
		})
	}
}

// Once the timeout has passed, exactly one more GET is sent, with a bound of
// its own, and its answer is judged as a poll's would be.
func TestWaitFinalRefreshOutcome(t *testing.T) {
	t.Parallel()
	// Under waitRefreshBound/2, so a poll bounded by the timeout itself shows.
	const timeout = time.Second
	cases := []struct {
		name  string
		stop  bool         // WaitUntilStopped instead of WaitUntilStarted
		final SandboxState // what the GET at the deadline answers; "404", "403"
		check func(*testing.T, *Sandbox, error)
	}{
		{"started", false, StateStarted, func(t *testing.T, sb *Sandbox, err error) {
			if err != nil || sb.State != StateStarted {
				t.Fatalf("wait = %+v, %v", sb, err)
			}
		}},
		{"still starting", false, StateStarting, func(t *testing.T, sb *Sandbox, err error) {
			var wt *WaitTimeoutError
			if !errors.As(err, &wt) || wt.LastState != StateStarting || wt.Timeout != timeout {
				t.Fatalf("err = %v", err)
			}
			if want := `daytona: sandbox sb did not reach started within 1s (last state "starting")`; err.Error() != want {
				t.Errorf("message = %q, want %q", err, want)
			}
		}},
		{"failed", false, StateError, func(t *testing.T, sb *Sandbox, err error) {
			var se *SandboxStateError
			if !errors.As(err, &se) || se.State != StateError || se.Reason != "disk full" || errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v", err)
			}
		}},
		{"gone while stopping", true, "404", func(t *testing.T, sb *Sandbox, err error) {
			if err != nil || sb.State != StateDestroyed {
				t.Fatalf("wait = %+v, %v", sb, err)
			}
		}},
		{"refused", false, "403", func(t *testing.T, sb *Sandbox, err error) {
			if !errors.Is(err, ErrForbidden) || errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &deadlineRecorder{}
			c, mux, srv, clock := setup(t, recordDeadlines(rec))
			deadline := clock.Now().Add(timeout)
			before := StateStarting
			if tc.stop {
				before = StateStopping
			}
			var early, late atomic.Int32
			mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
				if clock.Now().Before(deadline) {
					early.Add(1)
					writeJSON(w, 200, sandboxJSON(srv, "sb", before))
					return
				}
				late.Add(1)
				switch tc.final {
				case "404":
					writeJSON(w, 404, map[string]any{"statusCode": 404, "message": "Sandbox with ID or name sb not found"})
				case "403":
					writeJSON(w, 403, map[string]any{"statusCode": 403, "message": "Forbidden"})
				default:
					body := sandboxJSON(srv, "sb", tc.final)
					body["errorReason"] = "disk full"
					writeJSON(w, 200, body)
				}
			})
			wait := c.WaitUntilStarted
			if tc.stop {
				wait = c.WaitUntilStopped
			}
			sb, err := wait(t.Context(), "sb", timeout)
			tc.check(t, sb, err)
			if late.Load() != 1 || early.Load() == 0 {
				t.Errorf("GETs before the deadline %d, after it %d; want some, then exactly 1", early.Load(), late.Load())
			}
			var slept time.Duration
			for _, d := range clock.Sleeps() {
				slept += d
			}
			if slept != timeout {
				t.Errorf("slept %v, want the %v timeout: the last poll is the one at the deadline", slept, timeout)
			}
			if left := rec.Left(); len(left) == 0 || left[len(left)-1] < waitRefreshBound/2 {
				t.Errorf("the GETs had %v to answer, the last (at the deadline) want about %v", left, waitRefreshBound)
			}
		})
	}
}

// A final refresh that hangs ends the wait after its own bound, as a timeout
// naming the state the polls saw.
func TestWaitFinalRefreshIsBounded(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	c.waitRefreshBound = 50 * time.Millisecond
	deadline := clock.Now().Add(time.Second)
	mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		if !clock.Now().Before(deadline) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarting))
	})
	_, err := c.WaitUntilStarted(t.Context(), "sb", time.Second)
	var wt *WaitTimeoutError
	if !errors.As(err, &wt) || wt.LastState != StateStarting {
		t.Fatalf("err = %v", err)
	}
}

// The final refresh still answers to the caller's context: a cancel is a
// cancel, not a timeout.
func TestWaitFinalRefreshHonoursCancel(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	deadline := clock.Now().Add(time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		if !clock.Now().Before(deadline) {
			cancel()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarting))
	})
	_, err := c.WaitUntilStarted(ctx, "sb", time.Second)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
}

// The same with the real clock and real round trips: the state is served
// only to requests that arrive after the budget, and the wait must use such
// an answer. Nothing here depends on how fast the machine is.
func TestWaitRealClockSeesStateAfterBudget(t *testing.T) {
	t.Parallel()
	const budget = 200 * time.Millisecond
	cases := []struct {
		name string
		call func(*Client) (*Sandbox, error)
		// startTakes is how long POST start takes; past the budget, the
		// wait has nothing left but its final refresh.
		startTakes time.Duration
	}{
		{"wait", func(c *Client) (*Sandbox, error) {
			return c.WaitUntilStarted(context.Background(), "sb", budget)
		}, 0},
		{"start used the budget", func(c *Client) (*Sandbox, error) {
			return c.StartAndWait(context.Background(), "sb", budget)
		}, budget + 50*time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, mux, srv, _ := setup(t, func(cfg *Config) { cfg.Clock = nil })
			begin := time.Now()
			var late atomic.Int32
			mux.HandleFunc("POST /sandbox/sb/start", func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(tc.startTakes)
				writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarting))
			})
			mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(20 * time.Millisecond) // a remote control plane's round trip
				state := StateStarting
				if time.Since(begin) > budget {
					late.Add(1)
					state = StateStarted
				}
				writeJSON(w, 200, sandboxJSON(srv, "sb", state))
			})
			sb, err := tc.call(c)
			if err != nil || sb.State != StateStarted {
				t.Fatalf("wait = %+v, %v; a GET after the budget answers started", sb, err)
			}
			if late.Load() == 0 {
				t.Error("no GET after the budget, yet the wait succeeded")
			}
		})
	}
}

// The SDK's stop and delete waits poll with refreshDataSafe: an answer other
// than the sandbox or a 404 (a 502 from a proxy, a 503, a dropped
// connection) leaves the cached state as it was and the wait polls on, until
// its timeout. A Daytona blip longer than the retries of one GET must not
// fail them (a reusable lease's release would then delete the sandbox it
// was to keep). The start wait has no such leniency in the SDK: its first
// failed refresh fails it, as here.
func TestStopAndDeleteWaitsRideOutFailedPolls(t *testing.T) {
	t.Parallel()
	const budget = time.Minute
	const blip = 10 // failed GETs in a row, more than one GET's retries
	type outcome struct {
		sb  *Sandbox
		err error
	}
	stopWait := func(ctx context.Context, c *Client) outcome {
		sb, err := c.StopAndWait(ctx, "sb", nil, budget)
		return outcome{sb, err}
	}
	cases := []struct {
		name    string
		action  string
		reply   SandboxState
		fail    int          // the status of the failed polls
		forever bool         // the polls never recover
		final   SandboxState // what a poll answers after the blip; "404": gone
		call    func(context.Context, *Client) outcome
		check   func(*testing.T, outcome)
	}{
		{"stop through 502s", "POST /sandbox/sb/stop", StateStopping, http.StatusBadGateway, false, StateStopped,
			stopWait,
			func(t *testing.T, o outcome) {
				if o.err != nil || o.sb == nil || o.sb.State != StateStopped {
					t.Fatalf("StopAndWait = %+v, %v; want stopped once the polls answer again", o.sb, o.err)
				}
			}},
		{"stop through 401s", "POST /sandbox/sb/stop", StateStopping, http.StatusUnauthorized, false, StateStopped,
			stopWait,
			func(t *testing.T, o outcome) {
				if o.err != nil || o.sb == nil || o.sb.State != StateStopped {
					t.Fatalf("StopAndWait = %+v, %v; want stopped once the polls answer again", o.sb, o.err)
				}
			}},
		{"delete through 503s", "DELETE /sandbox/sb", StateDestroying, http.StatusServiceUnavailable, false, "404",
			func(ctx context.Context, c *Client) outcome { return outcome{nil, c.DeleteAndWait(ctx, "sb", budget)} },
			func(t *testing.T, o outcome) {
				if o.err != nil {
					t.Fatalf("DeleteAndWait = %v; want success once the polls see the sandbox gone", o.err)
				}
			}},
		{"stop never answered", "POST /sandbox/sb/stop", StateStopping, http.StatusBadGateway, true, StateStopped,
			stopWait,
			func(t *testing.T, o outcome) {
				var wt *WaitTimeoutError
				if !errors.As(o.err, &wt) {
					t.Fatalf("StopAndWait = %v; want the SDK's timeout", o.err)
				}
				if !slices.Equal(wt.Target, []SandboxState{StateStopped, StateDestroyed}) {
					t.Errorf("target = %v", wt.Target)
				}
			}},
		{"start through 502s", "POST /sandbox/sb/start", StateStarting, http.StatusBadGateway, false, StateStarted,
			func(ctx context.Context, c *Client) outcome {
				sb, err := c.StartAndWait(ctx, "sb", budget)
				return outcome{sb, err}
			},
			func(t *testing.T, o outcome) {
				if !errors.Is(o.err, ErrServer) {
					t.Fatalf("StartAndWait = %+v, %v; want the 502, as the SDK's start wait gives", o.sb, o.err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, mux, srv, _ := setup(t)
			mux.HandleFunc(tc.action, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, sandboxJSON(srv, "sb", tc.reply))
			})
			var polls atomic.Int32
			mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
				n := polls.Add(1)
				switch {
				case tc.forever || n <= blip:
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(tc.fail)
					_, _ = io.WriteString(w, "<html><body>bad gateway</body></html>")
				case tc.final == "404":
					writeJSON(w, 404, map[string]any{"statusCode": 404, "message": "Sandbox with ID or name sb not found"})
				default:
					writeJSON(w, 200, sandboxJSON(srv, "sb", tc.final))
				}
			})
			tc.check(t, tc.call(t.Context(), c))
		})
	}
}

// A wait whose timeout is the largest Duration (a config timeout of
// centuries, saturated) polls until the state comes: the bound of each poll
// (the time left plus the final refresh's margin) saturates instead of
// overflowing into a deadline already past, which would time the wait out
// on its first poll.
func TestAWaitOfTheLargestTimeoutPollsToTheState(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /sandbox/sb/start", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarting))
	})
	polls := lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) },
		StateStarting, StateStarting, StateStarted)
	sb, err := c.StartAndWait(context.Background(), "sb", math.MaxInt64)
	if err != nil || sb.State != StateStarted {
		t.Fatalf("wait = %+v, %v", sb, err)
	}
	if polls.Load() != 3 {
		t.Errorf("polls = %d, want 3", polls.Load())
	}
	if got := SaturatingAdd(math.MaxInt64-1, time.Second); got != math.MaxInt64 {
		t.Errorf("SaturatingAdd = %v", got)
	}
}
