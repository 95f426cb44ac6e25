package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/scenario"
)

// The operator's work in a setup sandbox, done by hand over SSH in real
// life and written straight into the sandbox's home here.
const (
	setupMarkerFile    = "setup-marker.txt"
	setupMarkerContent = "customised by hand over SSH\n"
	setupToolFile      = "bin/hello"
	setupToolContent   = "#!/bin/sh\necho hello from the captured template\n"
)

// setupHooks are the checks and manipulations of the interactive setup,
// template and runner ingress transcripts. Hook names carry their
// arguments: "ssh TOKEN1 CMD1 EXP1 SETUP 1440" checks the variables named.
func setupHooks(t *testing.T, env *emulatorEnv) map[string]func(scenario.Vars) error {
	str := func(vars scenario.Vars, name string) string {
		var s string
		_ = json.Unmarshal(vars[name], &s)
		return s
	}
	client, err := daytona.New(daytona.Config{APIKey: env.APIKey, APIURL: env.APIURL})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	released := map[string]chan struct{}{}

	hooks := map[string]func(args []string, vars scenario.Vars) error{
		// ssh TOKEN CMD EXP SANDBOX MINUTES: the payload's token is live at
		// the emulator for that sandbox, valid that many minutes, and the
		// command and expiry are the ones that go with it.
		"ssh": func(a []string, vars scenario.Vars) error {
			tok, cmd, exp, id := str(vars, a[0]), str(vars, a[1]), str(vars, a[2]), str(vars, a[3])
			minutes, _ := strconv.Atoi(a[4])
			acc, ok := env.Server.SSHAccess(tok)
			switch {
			case !ok:
				return fmt.Errorf("SSH token %s is not on record", a[0])
			case acc.SandboxID != id:
				return fmt.Errorf("SSH token %s is for sandbox %s, want %s", a[0], acc.SandboxID, id)
			case acc.ExpiresAt.Sub(acc.CreatedAt) != time.Duration(minutes)*time.Minute:
				return fmt.Errorf("SSH token %s lasts %s, want %d minutes", a[0], acc.ExpiresAt.Sub(acc.CreatedAt), minutes)
			case cmd != "ssh "+tok+"@ssh.app.daytona.io":
				return fmt.Errorf("the SSH command is not the one of token %s", a[0])
			case exp != acc.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z"):
				return fmt.Errorf("expiresAt %s is not the token's %s", exp, acc.ExpiresAt)
			}
			return nil
		},
		// revoked TOKEN: no longer accepted by the gateway.
		"revoked": func(a []string, vars scenario.Vars) error {
			if _, ok := env.Server.SSHAccess(str(vars, a[0])); ok {
				return fmt.Errorf("SSH token %s is still valid", a[0])
			}
			return nil
		},
		// setup-labels SANDBOX SESSION: the setup sandbox carries the plugin's labels.
		"setup-labels": func(a []string, vars scenario.Vars) error {
			v, ok := env.Server.Sandbox(str(vars, a[0]))
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", a[0])
			}
			want := map[string]string{
				"paperclip-provider": "daytona", "paperclip-company-id": "c-1", "paperclip-environment-id": "env-1",
				"paperclip-reuse-lease": "false", "paperclip-purpose": "interactive_setup", "paperclip-setup-session-id": a[1],
			}
			for k, w := range want {
				if v.Labels[k] != w {
					return fmt.Errorf("label %s = %q, want %q (labels %v)", k, v.Labels[k], w, v.Labels)
				}
			}
			if _, ok := v.Labels["paperclip-run-id"]; ok {
				return fmt.Errorf("a setup sandbox has no run: %v", v.Labels)
			}
			return nil
		},
		// sandbox-snapshot SANDBOX NAME: created from that snapshot (or image build).
		"sandbox-snapshot": func(a []string, vars scenario.Vars) error {
			v, ok := env.Server.Sandbox(str(vars, a[0]))
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", a[0])
			}
			if !strings.HasPrefix(v.Snapshot, a[1]) {
				return fmt.Errorf("sandbox %s was created from %q, want %q", a[0], v.Snapshot, a[1])
			}
			return nil
		},
		"state": func(a []string, vars scenario.Vars) error {
			v, ok := env.Server.Sandbox(str(vars, a[0]))
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", a[0])
			}
			if v.State != a[1] {
				return fmt.Errorf("sandbox %s is %s, want %s", a[0], v.State, a[1])
			}
			return nil
		},
		"gone": func(a []string, vars scenario.Vars) error {
			if v, ok := env.Server.Sandbox(str(vars, a[0])); ok && v.State != "destroying" {
				return fmt.Errorf("sandbox %s still exists (%s)", a[0], v.State)
			}
			return nil
		},
		"sandbox-count": func(a []string, vars scenario.Vars) error {
			if n, _ := strconv.Atoi(a[0]); len(env.Server.Sandboxes()) != n {
				return fmt.Errorf("%d sandboxes, want %d", len(env.Server.Sandboxes()), n)
			}
			return nil
		},
		"delete-behind-back": func(a []string, vars scenario.Vars) error {
			id := str(vars, a[0])
			if _, err := client.Delete(context.Background(), id); err != nil {
				return err
			}
			_, err := client.WaitForState(context.Background(), id, 30*time.Second, daytona.StateDestroyed)
			return err
		},
		"stop-behind-back": func(a []string, vars scenario.Vars) error {
			return env.Server.StopBehindClientsBack(str(vars, a[0]))
		},
		"archive": func(a []string, vars scenario.Vars) error {
			id := str(vars, a[0])
			if err := env.Server.StopBehindClientsBack(id); err != nil {
				return err
			}
			if _, err := client.Archive(context.Background(), id); err != nil {
				return err
			}
			_, err := client.WaitForState(context.Background(), id, 30*time.Second, daytona.StateArchived)
			return err
		},
		// operator-customises SANDBOX: what the operator does over SSH.
		"operator-customises": func(a []string, vars scenario.Vars) error {
			v, ok := env.Server.Sandbox(str(vars, a[0]))
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", a[0])
			}
			if err := os.WriteFile(filepath.Join(v.HomeDir, setupMarkerFile), []byte(setupMarkerContent), 0o644); err != nil {
				return err
			}
			tool := filepath.Join(v.HomeDir, setupToolFile)
			if err := os.MkdirAll(filepath.Dir(tool), 0o755); err != nil {
				return err
			}
			return os.WriteFile(tool, []byte(setupToolContent), 0o755)
		},
		// has-marker SANDBOX: the operator's files are in this sandbox too.
		"has-marker": func(a []string, vars scenario.Vars) error {
			v, ok := env.Server.Sandbox(str(vars, a[0]))
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", a[0])
			}
			got, err := os.ReadFile(filepath.Join(v.HomeDir, setupMarkerFile))
			if err != nil || string(got) != setupMarkerContent {
				return fmt.Errorf("marker in sandbox %s: %q, %v", a[0], got, err)
			}
			return nil
		},
		"snapshot-exists": func(a []string, vars scenario.Vars) error {
			if !slices.Contains(env.Server.Snapshots(), a[0]) {
				return fmt.Errorf("no snapshot %s (have %v)", a[0], env.Server.Snapshots())
			}
			return nil
		},
		"no-snapshot": func(a []string, vars scenario.Vars) error {
			if slices.Contains(env.Server.Snapshots(), a[0]) {
				return fmt.Errorf("snapshot %s exists", a[0])
			}
			return nil
		},
		// snapshot-fault OUTCOME [REASON…]: the next snapshot job ends so:
		// "fail" (silently, as Daytona's job handler lets it), "error" (the
		// sandbox errors with REASON) or "held NAME" (runs until released).
		"snapshot-fault": func(a []string, vars scenario.Vars) error {
			f := emulator.SnapshotFault{Times: 1}
			switch a[0] {
			case "fail":
				f.Outcome = emulator.SnapshotJobFails
			case "error":
				f.Outcome, f.Reason = emulator.SnapshotSandboxErrors, strings.Join(a[1:], " ")
			case "held":
				ch := make(chan struct{})
				mu.Lock()
				released[a[1]] = ch
				mu.Unlock()
				f.Until = ch
			default:
				return fmt.Errorf("unknown snapshot fault %q", a[0])
			}
			env.Server.AddSnapshotFault(f)
			return nil
		},
		// release NAME SANDBOX: the held job ends; wait until the sandbox is
		// back from snapshotting.
		"release": func(a []string, vars scenario.Vars) error {
			mu.Lock()
			ch := released[a[0]]
			mu.Unlock()
			close(ch)
			_, err := client.WaitForState(context.Background(), str(vars, a[1]), 30*time.Second, daytona.StateStarted)
			return err
		},
		// reaped NAME: the snapshot a timed-out capture left running was
		// recorded by Daytona and then deleted by the worker.
		"reaped": func(a []string, vars scenario.Vars) error {
			deadline := time.Now().Add(60 * time.Second)
			for {
				deleted := env.Server.Requests()["DELETE /api/snapshots/{id}"] > 0
				if deleted && !slices.Contains(env.Server.Snapshots(), a[0]) {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("snapshot %s was not deleted (snapshots %v, deletes seen: %v)", a[0], env.Server.Snapshots(), deleted)
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
		// differ A B: two captured values (generations) are not equal.
		"differ": func(a []string, vars scenario.Vars) error {
			if string(vars[a[0]]) == string(vars[a[1]]) {
				return fmt.Errorf("%s and %s are both %s", a[0], a[1], vars[a[0]])
			}
			return nil
		},
		// preview-token-opens SANDBOX TOKEN: the secret header reaches the
		// sandbox through the proxy (the toolbox accepts it without the key).
		"preview-token-opens": func(a []string, vars scenario.Vars) error {
			req, _ := http.NewRequest(http.MethodGet, env.ToolboxURL(str(vars, a[0]))+"/work-dir", nil)
			req.Header.Set("X-Daytona-Preview-Token", str(vars, a[1]))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("the preview token opens nothing: %s", res.Status)
			}
			return nil
		},
	}
	return func() map[string]func(scenario.Vars) error {
		out := map[string]func(scenario.Vars) error{}
		for _, name := range transcriptHookNames(t) {
			fields := strings.Fields(name)
			h, ok := hooks[fields[0]]
			if !ok {
				continue
			}
			args := fields[1:]
			out[name] = func(vars scenario.Vars) error { return h(args, vars) }
		}
		return out
	}()
}

// transcriptHookNames lists every hook step of the setup transcripts, so
// hooks with arguments can be registered under their full names.
func transcriptHookNames(t *testing.T) []string {
	var names []string
	for _, tr := range setupTranscripts {
		steps, err := scenario.ParseFile(transcriptPath(tr.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.Hook != "" {
				names = append(names, s.Hook)
			}
		}
	}
	return names
}

var setupTranscripts = []struct {
	name string
	env  []string
}{
	{name: "setup-template"},
	{name: "setup-capture-failures"},
	{name: "setup-bad-input"},
	{name: "runner-ingress"},
}

func setupVars(env *emulatorEnv) scenario.Vars {
	vars := env.vars(nil)
	vars["CFG"] = leaseConfig(env, "")
	vars["REUSE_CFG"] = leaseConfig(env, `,"reuseLease":true`)
	vars["TEMPLATE_CFG"] = leaseConfig(env, `,"snapshot":"my-template-v1"`)
	vars["RESOURCES_CFG"] = leaseConfig(env, `,"cpu":2`)
	vars["NO_KEY_CFG"] = json.RawMessage(fmt.Sprintf(`{"apiUrl":%q}`, env.APIURL))
	return vars
}

// TestInteractiveSetupTranscripts plays the interactive setup, template and
// runner ingress transcripts through the binary against the emulator; each
// must leave no sandbox and no snapshot of its own behind. Every run is
// recorded (--record) with debug logs on, and neither the recording nor the
// logs may hold any SSH token, SSH command or preview token the emulator
// issued, although the results carried them to the host.
func TestInteractiveSetupTranscripts(t *testing.T) {
	for _, tt := range setupTranscripts {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := startEmulator(t, emulator.Options{})
			general := env.Server.Snapshots()
			record := filepath.Join(t.TempDir(), "record.scenario")
			stderr := playTranscriptCapturingStderr(t, transcriptPath(tt.name), setupVars(env), setupHooks(t, env), tt.env,
				"--record", record, "--log-level", "debug")
			if err := waitForNoSandboxes(env, 10*time.Second); err != nil {
				t.Error(err)
			}
			if got := env.Server.Snapshots(); !slices.Equal(got, general) {
				t.Errorf("snapshots left behind: %v (the general ones are %v)", got, general)
			}
			recorded, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			secrets := env.Server.IssuedSecrets()
			if tt.name != "setup-bad-input" && len(secrets) == 0 {
				t.Fatal("the emulator issued no secret: the scan would prove nothing")
			}
			for where, text := range map[string]string{"--record transcript": string(recorded), "worker log": stderr} {
				for i, secret := range secrets {
					if strings.Contains(text, secret) {
						t.Errorf("the %s holds secret #%d of those the emulator issued", where, i)
					}
				}
				if strings.Contains(text, "@ssh.app.daytona.io") {
					t.Errorf("the %s holds an SSH command", where)
				}
			}
			if len(secrets) > 0 && !strings.Contains(string(recorded), `"<redacted>"`) {
				t.Error("the recording redacted nothing, yet secrets went to the host")
			}
		})
	}
}

// playTranscriptCapturingStderr is playTranscriptWithHooks that also returns
// everything the worker wrote on stderr.
func playTranscriptCapturingStderr(t *testing.T, path string, vars scenario.Vars, hooks map[string]func(scenario.Vars) error, env []string, args ...string) string {
	t.Helper()
	steps, err := scenario.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startWorker(t, env, args...)
	player := &scenario.Player{Worker: p, Vars: vars, Update: *update, Hooks: hooks}
	out, err := player.Play(steps)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if *update {
		if err := scenario.WriteFile(path, out); err != nil {
			t.Fatal(err)
		}
	}
	return p.Stderr()
}
