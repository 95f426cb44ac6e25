// Package shell builds the login-shell command line the plugin runs a
// command with, byte for byte: the profiles sourced, the caller's env in
// the order sent over git's non-interactive defaults, every word quoted.
package shell

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/js"
)

// Var is one caller environment entry, in the order the host sent it.
type Var struct {
	Key   string
	Value string
	Set   bool // the value was a JSON string; others are dropped, as in the plugin
}

// Env decodes the env member as the plugin reads it, keeping member
// order, because the plugin builds its `env K=V …` line in insertion order.
// It takes `env ?? {}` and Object.keys of it: a string or an array has its
// indices as keys ("0", "1", …, which no variable name can be), a number or
// a boolean none; an object's keys come in JavaScript's order.
func Env(raw json.RawMessage) ([]Var, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil // absent
	}
	v, ok := js.Decode(raw)
	if !ok {
		return nil, errors.New("params.env is not JSON")
	}
	var out []Var // null, a number or a boolean: no keys
	indices := func(n int) {
		out = make([]Var, n)
		for i := range out {
			out[i] = Var{Key: strconv.Itoa(i)}
		}
	}
	switch v := v.(type) {
	case string:
		indices(js.Length(v))
	case []any:
		indices(len(v))
	case *js.Object:
		for _, k := range v.Keys() {
			x, _ := v.Get(k)
			s, isString := x.(string)
			out = append(out, Var{Key: k, Value: s, Set: isString})
		}
	}
	return out, nil
}

// isShellEnvKey matches ^[A-Za-z_][A-Za-z0-9_]*$.
func isShellEnvKey(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !('a' <= c|0x20 && c|0x20 <= 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// nonInteractiveGitEnv keeps git and ssh from ever waiting on a prompt; the
// caller's env overrides any of them.
var nonInteractiveGitEnv = []Var{
	{Key: "GIT_TERMINAL_PROMPT", Value: "0", Set: true},
	{Key: "GCM_INTERACTIVE", Value: "Never", Set: true},
	{Key: "GIT_ASKPASS", Value: "echo", Set: true},
	{Key: "SSH_ASKPASS", Value: "echo", Set: true},
	{Key: "SSH_ASKPASS_REQUIRE", Value: "force", Set: true},
}

// profileLines source the login profiles the way the plugin does: the
// one-shot executor runs a non-login shell, and the sandbox image puts its
// CLIs on the PATH only through /etc/profile.
var profileLines = []string{
	`if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi`,
	`if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi`,
	`if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi`,
	`if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi`,
}

// LoginScript is the plugin's buildLoginShellScript, byte for byte: the
// profile lines, a cd to the quoted cwd, then `env K='v' … 'cmd' 'arg'…`
// with stdin redirected from a file, all joined by " && ".
func LoginScript(command string, args []string, cwd string, env []Var, stdinPath string) (string, error) {
	for _, e := range env {
		if !isShellEnvKey(e.Key) {
			return "", fmt.Errorf("Invalid sandbox environment variable key: %s", e.Key)
		}
	}
	merged := append([]Var(nil), nonInteractiveGitEnv...)
	for _, e := range env {
		replaced := false
		for i := range merged {
			if merged[i].Key == e.Key {
				merged[i] = e
				replaced = true
				break
			}
		}
		if !replaced {
			merged = append(merged, e)
		}
	}
	var envArgs []string
	for _, e := range merged {
		if e.Set {
			envArgs = append(envArgs, e.Key+"="+Quote(e.Value))
		}
	}
	parts := make([]string, 0, len(args)+1)
	parts = append(parts, Quote(command))
	for _, a := range args {
		parts = append(parts, Quote(a))
	}
	cmd := strings.Join(parts, " ")
	if stdinPath != "" {
		cmd += " < " + Quote(stdinPath)
	}
	final := cmd
	if len(envArgs) > 0 {
		final = "env " + strings.Join(envArgs, " ") + " " + cmd
	}
	lines := append([]string(nil), profileLines...)
	if cwd != "" {
		lines = append(lines, "cd "+Quote(cwd))
	}
	lines = append(lines, final)
	return strings.Join(lines, " && "), nil
}

// Quote is the plugin's shellQuote: single quotes, with each embedded quote
// written as '"'"'.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

var gitNetworkSubcommands = map[string]bool{"push": true, "fetch": true, "pull": true, "ls-remote": true, "clone": true}

// IsGitNetworkCommand is the plugin's isGitNetworkCommand: git's first
// positional argument (skipping -C/-c/--git-dir/--work-tree and their
// values) is a network subcommand, or `remote update` / `submodule update`.
func IsGitNetworkCommand(command string, args []string) bool {
	if path.Base(command) != "git" {
		return false
	}
	for i := 0; i < len(args); {
		arg := args[i]
		switch {
		case arg == "-C" || arg == "-c" || arg == "--git-dir" || arg == "--work-tree":
			i += 2
			continue
		case strings.HasPrefix(arg, "-"):
			i++
			continue
		case gitNetworkSubcommands[arg]:
			return true
		case arg == "remote" || arg == "submodule":
			for _, next := range args[i+1:] {
				if !strings.HasPrefix(next, "-") {
					return next == "update"
				}
			}
			return false
		}
		return false
	}
	return false
}
