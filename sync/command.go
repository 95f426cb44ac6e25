package sync

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
)

// CommandError is a sandbox command that ran and exited non-zero. Its
// message is the plugin's: "Daytona <label> command failed (exit N): <output>".
type CommandError struct {
	Label    string
	ExitCode int
	Output   string // trimmed
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("Daytona %s command failed (exit %d)", e.Label, e.ExitCode)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

// run executes one sandbox command under the call's timeout and fails with
// a *CommandError on a non-zero exit; it returns the untrimmed output.
func (c *Config) run(ctx context.Context, command, label string) (string, error) {
	res, err := c.Sandbox.Execute(ctx, daytona.ExecuteRequest{Command: command, Timeout: c.timeout()})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", &CommandError{Label: label, ExitCode: res.ExitCode, Output: js.Trim(res.Result)}
	}
	return res.Result, nil
}

// removeScratch is the plugin's best-effort removeSandboxScratch: one
// command, every failure ignored (cleanup must never mask the real error).
// It runs on its own context so that a cancelled call still cleans up.
func (c *Config) removeScratch(ctx context.Context, paths []string) {
	if len(paths) == 0 {
		return
	}
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = "rm -f " + shellQuote(p)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout()+cleanupSlack)
	defer cancel()
	_, _ = c.Sandbox.Execute(cctx, daytona.ExecuteRequest{Command: shScript(strings.Join(parts, " ; ")), Timeout: c.timeout()})
}

// cleanupSlack is added to a cleanup command's own timeout for its request.
const cleanupSlack = 5 * time.Second

// maxShArg keeps a `sh -c '<script>'` argument under Linux's 128 KiB limit
// for one argv string (MAX_ARG_STRLEN), with room for the quoting.
const maxShArg = 100 << 10

// shScript runs script under a POSIX sh, as the plugin's `sh -c <quoted>`.
// A script too long for one argument (the plugin fails there with E2BIG)
// is fed to sh on stdin through a here-document instead: the toolbox pipes
// the whole command to the shell, so its length is not limited.
func shScript(script string) string {
	quoted := shellQuote(script)
	if len(quoted) <= maxShArg {
		return "sh -c " + quoted
	}
	delim := "PAPERCLIP_SCRIPT_END"
	for strings.Contains(script, delim) {
		delim += "_"
	}
	return "sh -s <<'" + delim + "'\n" + script + "\n" + delim
}
