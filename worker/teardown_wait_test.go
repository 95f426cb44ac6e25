package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/protocol"
)

// blipAfter answers the next n GETs of a sandbox with a proxy's 502 page
// once a request matching arm has been served: a Daytona blip that begins
// as the sandbox starts stopping or being deleted.
type blipAfter struct {
	next http.Handler
	arm  *regexp.Regexp
	n    int

	mu      sync.Mutex
	left    int
	blipped int
}

var sandboxGet = regexp.MustCompile(`^/api/sandbox/[^/]+$`)

func (b *blipAfter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	if r.Method == http.MethodGet && sandboxGet.MatchString(r.URL.Path) && b.left > 0 {
		b.left--
		b.blipped++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		return
	}
	b.mu.Unlock()
	b.next.ServeHTTP(w, r)
	if r.Method != http.MethodGet && b.arm.MatchString(r.Method+" "+r.URL.Path) {
		b.mu.Lock()
		b.left = b.n
		b.mu.Unlock()
	}
}

func (b *blipAfter) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.blipped
}

// A release or destroy whose wait for the stop or the delete meets a
// Daytona blip (502s from its proxy for longer than one GET's retries)
// waits it out, as the SDK's stop and delete waits do (refreshDataSafe):
// the reusable lease's sandbox is kept stopped, not deleted, and the
// destroy answers destroyed.
func TestTeardownWaitsRideOutADaytonaBlip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		method  string
		arm     string // the request after which the GETs fail
		extra   []string
		want    string
		remains string // the sandbox's state afterwards; "" = gone
	}{
		{"release of a reusable lease", protocol.MethodEnvironmentReleaseLease, `^POST /api/sandbox/[^/]+/stop$`,
			[]string{`"reuseLease":true`}, protocol.LeaseStateStopped, "stopped"},
		{"stop lease", protocol.MethodEnvironmentStopLease, `^POST /api/sandbox/[^/]+/stop$`,
			nil, protocol.LeaseStateStopped, "stopped"},
		{"release that cancels work", protocol.MethodEnvironmentReleaseLease, `^POST /api/sandbox/[^/]+/stop$`,
			[]string{`"reuseLease":true`}, protocol.LeaseStateStopped, "stopped"},
		{"destroy", protocol.MethodEnvironmentDestroyLease, `^DELETE /api/sandbox/[^/]+$`,
			nil, protocol.LeaseStateDestroyed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nop := zerolog.Nop()
			srv, err := emulator.New(emulator.Options{Root: t.TempDir(), StepDelay: 20 * time.Millisecond, Logger: &nop})
			if err != nil {
				t.Fatal(err)
			}
			blip := &blipAfter{next: srv, arm: regexp.MustCompile(tc.arm), n: 10}
			hs := httptest.NewServer(blip)
			t.Cleanup(func() { _ = srv.Close(); hs.Close() })
			// The client's back-off is shortened, not its attempts: the blip
			// still outlasts one GET's retries.
			retry := daytona.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}
			w := New(discardHost{}, Options{Logger: zerolog.Nop(), Timing: Timing{ClientRetry: retry}})
			t.Cleanup(func() { _ = w.Close(context.Background()) })
			l := acquireThroughHandler(t, w, emulator.DevAPIKey, hs.URL+"/api", tc.extra...)

			params := `{` + l.base + `,"providerLeaseId":"` + l.id + `"`
			if tc.name == "release that cancels work" {
				params += `,"cancelActiveWork":true`
			}
			res, err := w.Handle(t.Context(), requestOf(tc.method, params+`}`))
			if err != nil {
				t.Fatalf("%s: %v (after %d failed polls)", tc.method, err, blip.count())
			}
			b, _ := json.Marshal(res)
			if want := fmt.Sprintf(`{"providerLeaseId":%q,"state":%q}`, l.id, tc.want); string(b) != want {
				t.Errorf("%s = %s, want %s", tc.method, b, want)
			}
			if blip.count() == 0 {
				t.Fatal("no poll met the blip: the test proves nothing")
			}
			view, ok := srv.Sandbox(l.id)
			switch {
			case tc.remains == "" && ok && view.State != "destroyed":
				t.Errorf("sandbox left %s, want it deleted", view.State)
			case tc.remains != "" && (!ok || view.State != tc.remains):
				t.Errorf("sandbox = %+v (found %v), want it kept %s", view, ok, tc.remains)
			}
		})
	}
}
