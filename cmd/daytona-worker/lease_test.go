package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/pty"
)

// emulator is a local Daytona for one test, and the transcript variables
// that point a worker at it.
type emulatorEnv struct {
	*emulatortest.Env
	root string
}

func startEmulator(t *testing.T, opts emulator.Options) *emulatorEnv {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	env := &emulatorEnv{Env: emulatortest.Start(t, opts), root: opts.Root}
	removeDuplexDiagnostics(t, env.Env)
	return env
}

// removeDuplexDiagnostics removes, when tb ends, the diagnostics file of
// every duplex channel env's sandboxes opened, also of a channel whose open
// failed and whose session the host never learnt.
func removeDuplexDiagnostics(tb testing.TB, env *emulatortest.Env) {
	tb.Cleanup(func() { pty.RemoveDiagnostics(env.Server.PTYSessionIDs()) })
}

// vars are the variables a transcript against the emulator can use.
func (env *emulatorEnv) vars(extra map[string]string) scenario.Vars {
	vars := scenario.Vars{
		"DAYTONA_API_URL": scenario.StringVar(env.APIURL),
		"DAYTONA_API_KEY": scenario.StringVar(env.APIKey),
		"EMULATOR_ROOT":   scenario.StringVar(env.root),
	}
	for k, v := range extra {
		vars[k] = scenario.StringVar(v)
	}
	return vars
}

func transcriptPath(name string) string {
	return filepath.Join("..", "..", "testdata", "transcripts", name+".scenario")
}

func TestLeaseEphemeral(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	playTranscriptWithHooks(t, transcriptPath("lease-ephemeral"), env.vars(nil), leaseHooks(t, env), nil)
	if n := len(env.Server.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left behind", n)
	}
}

// leaseHooks are the emulator manipulations and checks lease transcripts use.
func leaseHooks(t *testing.T, env *emulatorEnv) map[string]func(scenario.Vars) error {
	lease := func(vars scenario.Vars, name string) string {
		var s string
		_ = json.Unmarshal(vars[name], &s)
		return s
	}
	state := func(want string) func(scenario.Vars) error {
		return func(vars scenario.Vars) error {
			id := lease(vars, "LEASE")
			v, ok := env.Server.Sandbox(id)
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", id)
			}
			if v.State != want {
				return fmt.Errorf("sandbox %s is %s, want %s", id, v.State, want)
			}
			return nil
		}
	}
	return map[string]func(scenario.Vars) error{
		"expect-started": state("started"),
		"expect-stopped": state("stopped"),
		"expect-gone": func(vars scenario.Vars) error {
			id := lease(vars, "LEASE")
			if v, ok := env.Server.Sandbox(id); ok && v.State != "destroying" {
				return fmt.Errorf("sandbox %s still exists (%s)", id, v.State)
			}
			return nil
		},
		"expect-none": func(scenario.Vars) error {
			return waitForNoSandboxes(env, 10*time.Second)
		},
		"expect-retained": func(vars scenario.Vars) error {
			id := lease(vars, "LEASE")
			v, ok := env.Server.Sandbox(id)
			switch {
			case !ok:
				return fmt.Errorf("sandbox %s is gone", id)
			case v.State != "stopped":
				return fmt.Errorf("sandbox %s is %s, want stopped", id, v.State)
			case v.AutoDeleteInterval != -1:
				return fmt.Errorf("sandbox %s auto-deletes after %d minutes, want never (-1)", id, v.AutoDeleteInterval)
			}
			if _, err := os.Stat(v.HomeDir); err != nil {
				return fmt.Errorf("retained files: %w", err)
			}
			return nil
		},
		"expect-ttl": func(vars scenario.Vars) error {
			id := lease(vars, "LEASE")
			v, ok := env.Server.Sandbox(id)
			if !ok || v.AutoDestroyAt == nil {
				return fmt.Errorf("sandbox %s has no TTL", id)
			}
			left := time.Until(*v.AutoDestroyAt)
			if left > 2*time.Hour || left < 118*time.Minute {
				return fmt.Errorf("sandbox %s is destroyed in %s, want 119-120 minutes (rounded down)", id, left)
			}
			got, err := time.Parse(time.RFC3339Nano, lease(vars, "EXPIRES_AT"))
			if err != nil || !got.Equal(v.AutoDestroyAt.Truncate(time.Millisecond)) {
				return fmt.Errorf("expiresAt %s is not the provider's destroy time %s", lease(vars, "EXPIRES_AT"), v.AutoDestroyAt)
			}
			return nil
		},
		"stop-behind-back":  func(vars scenario.Vars) error { return env.Server.StopBehindClientsBack(lease(vars, "LEASE")) },
		"missing-container": func(vars scenario.Vars) error { return env.Server.SetMissingContainer(lease(vars, "LEASE")) },
		"hang-create": func(scenario.Vars) error {
			env.Server.AddFault(emulator.Fault{Method: "POST", Path: `^/api/sandbox$`, Hang: true, Times: 1})
			return nil
		},
		"heal": func(scenario.Vars) error { env.Server.ClearFaults(); return nil },
		"expect-labels": func(vars scenario.Vars) error {
			id := lease(vars, "LEASE")
			v, ok := env.Server.Sandbox(id)
			if !ok {
				return fmt.Errorf("sandbox %s does not exist", id)
			}
			want := map[string]string{
				"paperclip-provider": "daytona", "paperclip-company-id": "c-1", "paperclip-environment-id": "env-1",
				"paperclip-reuse-lease": "false", "paperclip-run-id": "run-1",
				"paperclip-create-attempt": strings.TrimPrefix(v.Name, "paperclip-create-"),
			}
			for k, w := range want {
				if v.Labels[k] != w {
					return fmt.Errorf("label %s = %q, want %q (labels %v)", k, v.Labels[k], w, v.Labels)
				}
			}
			if v.AutoStopInterval != 15 || v.AutoArchiveInterval != 60 || v.AutoDeleteInterval != 10080 {
				return fmt.Errorf("intervals %d/%d/%d, want the plugin's defaults 15/60/10080",
					v.AutoStopInterval, v.AutoArchiveInterval, v.AutoDeleteInterval)
			}
			return nil
		},
		"hang-get": func(scenario.Vars) error {
			env.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/[^/]+$`, Hang: true})
			return nil
		},
	}
}

func waitForNoSandboxes(env *emulatorEnv, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		left := env.Server.Sandboxes()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var names []string
			for _, v := range left {
				names = append(names, v.Name+" ("+v.State+")")
			}
			return fmt.Errorf("sandboxes left behind: %s", strings.Join(names, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leaseConfig(env *emulatorEnv, extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000,"livenessTimeoutMs":5000%s}`, env.APIKey, env.APIURL, extra))
}

func TestLeaseTranscripts(t *testing.T) {
	tests := []struct {
		name string
		opts emulator.Options
		cfg  string
	}{
		{name: "lease-reuse", cfg: `,"reuseLease":true`},
		{name: "lease-resume-after-autostop", cfg: `,"reuseLease":true`},
		{name: "lease-stop"},
		{name: "lease-ttl"},
		{name: "lease-create-timeout"},
		{name: "lease-create-lost", opts: emulator.Options{StepDelay: 1500 * time.Millisecond}},
		{name: "lease-liveness", cfg: `,"livenessTimeoutMs":300`},
		{name: "probe"},
		{name: "execute-session"},
		{name: "demo"},
		{name: "terminals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := startEmulator(t, tt.opts)
			vars := env.vars(nil)
			vars["CFG"] = leaseConfig(env, tt.cfg)
			vars["FAST_CFG"] = leaseConfig(env, `,"timeoutMs":1000`)
			vars["PLAIN_CFG"] = leaseConfig(env, "")
			vars["IN_TWO_HOURS"] = scenario.StringVar(time.Now().Add(2*time.Hour + 30*time.Second).UTC().Format(time.RFC3339))
			vars["IN_THIRTY_SECONDS"] = scenario.StringVar(time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339))
			playTranscriptWithHooks(t, transcriptPath(tt.name), vars, leaseHooks(t, env), nil)
			if err := waitForNoSandboxes(env, 10*time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}
