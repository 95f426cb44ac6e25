package pty

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// event is one thing a Sink was told.
type event struct {
	kind            string // "output", "loginExit", "data", "exit"
	route           Route
	text            string
	data            []byte
	code            *int
	transportClosed bool
}

// recorder is a Sink that keeps everything, optionally holding output calls
// until released (a host that does not read).
type recorder struct {
	mu      sync.Mutex
	events  []event
	changed chan struct{}
	hold    chan struct{} // while non-nil and open, output calls wait
	holding chan struct{} // a token when an output call starts waiting
}

func newRecorder() *recorder {
	return &recorder{changed: make(chan struct{}, 1), holding: make(chan struct{}, 1)}
}

func (r *recorder) wait() {
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		signal(r.holding)
		<-hold
	}
}

func (r *recorder) add(e event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	signal(r.changed)
	return nil
}

func (r *recorder) LoginOutput(rt Route, text string) error {
	r.wait()
	return r.add(event{kind: "output", route: rt, text: text})
}

func (r *recorder) LoginExit(rt Route, code *int) error {
	return r.add(event{kind: "loginExit", route: rt, code: code})
}

func (r *recorder) DuplexData(rt Route, data []byte) error {
	r.wait()
	return r.add(event{kind: "data", route: rt, data: bytes.Clone(data)})
}

func (r *recorder) DuplexExit(rt Route, code *int, transportClosed bool) error {
	return r.add(event{kind: "exit", route: rt, code: code, transportClosed: transportClosed})
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitFor waits until cond holds for the events so far.
func (r *recorder) waitFor(t *testing.T, what string, cond func([]event) bool) []event {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		evs := r.snapshot()
		if cond(evs) {
			return evs
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; events: %s", what, describe(evs))
		}
	}
}

func describe(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		switch e.kind {
		case "output":
			b.WriteString("output " + strings.ReplaceAll(e.text, "\r", `\r`) + "; ")
		case "data":
			b.WriteString("data(" + string(rune('0'+len(e.data)%10)) + ") ")
		default:
			b.WriteString(e.kind + " ")
		}
	}
	return b.String()
}

// text is everything a login route printed.
func text(evs []event, rt Route) string {
	var b strings.Builder
	for _, e := range evs {
		if e.kind == "output" && e.route == rt {
			b.WriteString(e.text)
		}
	}
	return b.String()
}

// data is everything a duplex route carried.
func data(evs []event, rt Route) []byte {
	var b bytes.Buffer
	for _, e := range evs {
		if e.kind == "data" && e.route == rt {
			b.Write(e.data)
		}
	}
	return b.Bytes()
}

// exitOf is the route's exit event, if any.
func exitOf(evs []event, rt Route) *event {
	for i := range evs {
		if (evs[i].kind == "exit" || evs[i].kind == "loginExit") && evs[i].route == rt {
			return &evs[i]
		}
	}
	return nil
}

// sandbox is an emulated sandbox with its toolbox.
type sandbox struct {
	env  *emulatortest.Env
	c    *daytona.Client
	sb   *daytona.Sandbox
	tb   *daytona.Toolbox
	home string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	env := emulatortest.Start(t, emulator.Options{})
	c, err := daytona.New(daytona.Config{APIKey: env.APIKey, APIURL: env.APIURL})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateAndWait(t.Context(), daytona.CreateParams{}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tb := c.Toolbox(sb)
	home, err := tb.UserHomeDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Login shells find the stand-in CLIs in ~/bin.
	writeFile(t, filepath.Join(home, ".bash_profile"), `export PATH="$HOME/bin:$PATH"`+"\n", 0o644)
	return &sandbox{env: env, c: c, sb: sb, tb: tb, home: home}
}

// standIn is a stand-in login CLI from testdata/standins.
func standIn(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "standins", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bin installs an executable script in the sandbox's ~/bin.
func (s *sandbox) bin(t *testing.T, name, script string) {
	t.Helper()
	writeFile(t, filepath.Join(s.home, "bin", name), script, 0o755)
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// ids mints session UUIDs and removes what sessions leave in the shared
// /tmp (duplex diagnostics) when the test ends.
type ids struct {
	mu   sync.Mutex
	uids []string
}

func newIDs(t *testing.T) *ids {
	i := &ids{}
	t.Cleanup(func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		ptyIDs := make([]string, len(i.uids))
		for k, u := range i.uids {
			ptyIDs[k] = duplexPTYPrefix + u
		}
		RemoveDiagnostics(ptyIDs)
	})
	return i
}

func (i *ids) next() string {
	u := uuid.NewString()
	i.mu.Lock()
	i.uids = append(i.uids, u)
	i.mu.Unlock()
	return u
}

// newManager is a Manager for one test, closed with it.
func newManager(t *testing.T, sink Sink, opts Options) *Manager {
	t.Helper()
	opts.Sink = sink
	if opts.NewID == nil {
		opts.NewID = newIDs(t).next
	}
	m := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// sessionHome is a fresh login session home, removed (with its parent when
// empty) when the test ends: the emulator's sandboxes share the host's /tmp.
func sessionHome(t *testing.T) string {
	home := "/tmp/paperclip-adapter-login/" + uuid.NewString()
	t.Cleanup(func() {
		_ = os.RemoveAll(home)
		_ = os.Remove(filepath.Dir(home))
	})
	return home
}
