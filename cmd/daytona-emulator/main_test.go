package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// The test binary doubles as the emulator binary: re-executed with this
// variable set it runs main, so the test needs no separate build.
const runMainEnv = "DAYTONA_EMULATOR_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"daytona-emulator"}, strings.Fields(os.Getenv("DAYTONA_EMULATOR_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func call(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestBinaryPrintsURLAndCleansUpOnSIGTERM(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1",
		"DAYTONA_EMULATOR_ARGS=--listen 127.0.0.1:0 --api-key sekrit --step-delay 0 --root "+root)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read first line: %v (stderr: %s)", err, stderr.String())
	}
	m := regexp.MustCompile(`^DAYTONA_API_URL=(http://127\.0\.0\.1:\d+/api)\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first stdout line = %q", line)
	}
	api := m[1]

	if code, _ := call(t, "GET", api+"/sandbox", emulator.DevAPIKey, ""); code != 401 {
		t.Fatalf("dev key accepted with --api-key set: %d", code)
	}
	code, body := call(t, "POST", api+"/sandbox", "sekrit", `{}`)
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct {
		ID              string `json:"id"`
		ToolboxProxyURL string `json:"toolboxProxyUrl"`
	}
	if err := json.Unmarshal(body, &sb); err != nil {
		t.Fatal(err)
	}
	tb := sb.ToolboxProxyURL + "/" + sb.ID
	if code, body := call(t, "POST", tb+"/process/session", "sekrit", `{"sessionId":"s"}`); code != 201 {
		t.Fatalf("create session: %d %s", code, body)
	}
	if code, body := call(t, "POST", tb+"/process/session/s/exec", "sekrit", `{"command":"sleep 300 & echo $! > bg.pid"}`); code != 200 {
		t.Fatalf("exec: %d %s", code, body)
	}
	code, body = call(t, "POST", tb+"/process/execute", "sekrit", `{"command":"cat bg.pid"}`)
	var res struct{ Result string }
	if err := json.Unmarshal(body, &res); err != nil || code != 200 {
		t.Fatalf("execute: %d %s", code, body)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Result))
	if err != nil {
		t.Fatalf("pid %q: %v", res.Result, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v (stderr: %s)", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("emulator did not exit after SIGTERM")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if !strings.Contains(string(stat), ") Z ") {
			t.Fatalf("sandbox process %d survived SIGTERM: %s", pid, stat)
		}
	}
	rest, _ := io.ReadAll(stdout)
	if len(rest) != 0 {
		t.Errorf("stdout after the first line: %q (logs belong on stderr)", rest)
	}
	if !strings.Contains(stderr.String(), `"message":"shutting down"`) {
		t.Errorf("expected JSON logs on stderr, got %s", stderr.String())
	}
	if strings.Contains(stderr.String(), "sekrit") {
		t.Error("the API key was logged")
	}
}
