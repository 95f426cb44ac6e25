package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

// checkKey is the emulator's key in these tests: distinctive, so a leak into
// any output is easy to spot.
const checkKey = "dtn_check_SECRET_7f3a9c"

type checkRun struct {
	code           int
	stdout, stderr string
}

// runCheckBinary runs the real binary's check subcommand with a minimal
// environment plus env.
func runCheckBinary(t *testing.T, env []string, args ...string) checkRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, workerBin, append([]string{"check"}, args...)...)
	cmd.Env = append(workerhost.MinimalEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	r := checkRun{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("check %v → %d\n%s%s", args, r.code, r.stdout, r.stderr)
	return r
}

func (r checkRun) assertNoKey(t *testing.T, key string) {
	t.Helper()
	assert.NotContains(t, r.stdout, key, "the API key must never be printed")
	assert.NotContains(t, r.stderr, key, "the API key must never be printed")
}

func TestCheckPassesAgainstAWorkingDaytona(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	r := runCheckBinary(t, []string{"DAYTONA_API_KEY=" + checkKey}, "--api-url", env.APIURL)
	require.Equal(t, 0, r.code)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.Contains(t, lines[0], "checking the Daytona at "+env.APIURL)
	assert.Regexp(t, `(?m)^  ok    config accepted \(environmentValidateConfig\) +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `(?m)^  ok    Daytona reachable, API key accepted +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `(?m)^  ok    sandbox created and started \(environmentProbe\) +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `(?m)^        paperclip-probe-[0-9a-f-]+, shell (bash|sh), workspace /\S+$`, r.stdout)
	assert.Regexp(t, `(?m)^  ok    sandbox removed +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `^PASS  this Daytona can run Paperclip sandboxes \(\S+ m?s\)$`, lines[len(lines)-1])
	r.assertNoKey(t, checkKey)

	// The probe really created a sandbox and really removed it.
	assert.Positive(t, env.Server.Requests()["POST /api/sandbox"], "a sandbox was created: %v", env.Server.Requests())
	assert.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 0 }, 30*time.Second, 20*time.Millisecond)
}

func TestCheckNamesARejectedKey(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	wrong := "dtn_wrong_SECRET_1b2c3d"
	r := runCheckBinary(t, []string{"DAYTONA_API_KEY=" + wrong}, "--api-url", env.APIURL)
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `(?m)^  ok    Daytona reachable +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `(?m)^  FAIL  API key accepted$`, r.stdout)
	assert.Contains(t, r.stdout, "Daytona answered 401: Invalid credentials")
	assert.Regexp(t, `(?m)^FAIL  this Daytona cannot run Paperclip sandboxes yet`, r.stdout)
	assert.NotContains(t, r.stdout, "environmentProbe", "nothing is created with a key Daytona refused")
	assert.Empty(t, env.Server.Sandboxes())
	r.assertNoKey(t, wrong)
}

func TestCheckNamesAnUnreachableDaytona(t *testing.T) {
	t.Parallel()
	// A port that was free a moment ago: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	r := runCheckBinary(t, []string{"DAYTONA_API_KEY=" + checkKey}, "--api-url", "http://"+addr+"/api")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `(?m)^  FAIL  Daytona reachable +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `ECONNREFUSED|connection refused`, r.stdout)
	r.assertNoKey(t, checkKey)
}

func TestCheckNeedsAKey(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	r := runCheckBinary(t, nil, "--api-url", env.APIURL)
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `(?m)^  FAIL  config accepted \(environmentValidateConfig\)`, r.stdout)
	assert.Contains(t, r.stdout, "Daytona sandbox environments require an API key in config or DAYTONA_API_KEY.")
	assert.Zero(t, len(env.Server.Requests()), "nothing is sent to Daytona without a key")
}

// DAYTONA_API_URL stands in for --api-url, as the emulator prints it.
func TestCheckReadsTheURLFromTheEnvironment(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	r := runCheckBinary(t, []string{"DAYTONA_API_KEY=" + checkKey, "DAYTONA_API_URL=" + env.APIURL})
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "checking the Daytona at "+env.APIURL)
}

func TestCheckReportsAFailedProbe(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	env.Server.AddFault(emulator.Fault{Method: "POST", Path: `^/api/sandbox$`, Status: 500, Body: `{"statusCode":500,"message":"no capacity in this region"}`})
	r := runCheckBinary(t, []string{"DAYTONA_API_KEY=" + checkKey}, "--api-url", env.APIURL)
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `(?m)^  ok    Daytona reachable, API key accepted`, r.stdout)
	assert.Regexp(t, `(?m)^  FAIL  sandbox created and started \(environmentProbe\)`, r.stdout)
	assert.Contains(t, r.stdout, "no capacity in this region", "Daytona's own words reach the operator")
	r.assertNoKey(t, checkKey)
}

func TestCheckUsage(t *testing.T) {
	t.Parallel()
	r := runCheckBinary(t, nil, "--bogus")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "flag provided but not defined: -bogus")
	r = runCheckBinary(t, nil, "--help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "DAYTONA_API_KEY")
	r = runCheckBinary(t, nil, "extra")
	assert.Equal(t, 2, r.code)
}

// A probe sandbox Daytona does not delete is reported, by name, as a failure
// (run in process to shorten the wait for its removal).
func TestCheckReportsASandboxLeftBehind(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	// A key that may create but not delete: the worker gives up on the
	// probe's sandbox at once (a 5xx it would retry through its cleanup
	// grace, 20 s of real time), and the check finds it still there.
	env.Server.AddFault(emulator.Fault{Method: "DELETE", Path: `^/api/sandbox/`, Status: 403})
	var out, errOut bytes.Buffer
	c := &checker{
		out: &out, log: nopLogger(), apiURL: env.APIURL, config: map[string]any{"apiUrl": env.APIURL},
		getenv: func(k string) string {
			if k == "DAYTONA_API_KEY" {
				return checkKey
			}
			return ""
		},
		removalWait: 500 * time.Millisecond,
	}
	ok := c.run(context.Background(), time.Minute)
	t.Log(out.String(), errOut.String())
	assert.False(t, ok)
	assert.Regexp(t, `(?m)^  FAIL  sandbox removed +\S+ m?s$`, out.String())
	assert.Regexp(t, `(?m)paperclip-probe-[0-9a-f-]+ \(\S+\) is still there in state started; delete it`, out.String())
	assert.NotContains(t, out.String(), checkKey)
}

func nopLogger() zerolog.Logger { return zerolog.Nop() }

// Each step's time is shown in the unit that reads best.
func TestCheckFormatsTheTimeAStepTook(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		500 * time.Microsecond:  "0.50 ms",
		20 * time.Millisecond:   "20 ms",
		999 * time.Millisecond:  "999 ms",
		1500 * time.Millisecond: "1.5 s",
		20 * time.Second:        "20.0 s",
	} {
		assert.Equal(t, want, formatTook(d), "%v", d)
	}
}

func TestCheckNamesAURLThatIsNoDaytonaAPI(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{APIKey: checkKey})
	r := runCheckBinary(t, []string{"DAYTONA_API_KEY=" + checkKey}, "--api-url", strings.TrimSuffix(env.APIURL, "/api"))
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `(?m)^  ok    Daytona reachable +\S+ m?s$`, r.stdout)
	assert.Regexp(t, `(?m)^  FAIL  Daytona answers as a Daytona API$`, r.stdout)
	assert.Contains(t, r.stdout, "Daytona answered 404")
	assert.Contains(t, r.stdout, "usually ending in /api")
	r.assertNoKey(t, checkKey)
}

// check prints the URL it checks without what may be credentials, also
// when the URL does not parse.
func TestCheckRedactsTheURLItShows(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://app.daytona.io/api":                          "https://app.daytona.io/api",
		"http://u:PASS%zz99@example.com/api":                  "http://<redacted>@example.com/api",
		"https://u:PASSWORD99@example.com/api?api_key=QTOKEN": "https://<redacted>@example.com/api?api_key=<redacted>",
	} {
		if got := redactURL(raw); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
