// Command refrandom writes random refcheck scenarios: plays of every
// method whose reference copy is real (config validation, probe, lease
// lifecycle, realize, execute, interactive setup, templates, runner
// ingress) with members of odd but plausible values and types, and no
// declared differences beyond those of a plain acquire and probe. Played
// through both workers (`make refcheck-random`), a step where the two
// differ is either a row of differences.txt already (the triage below
// leaves out the commonest: an invalid-params refusal where the plugin
// throws) or a finding. It found the bugs of this tool's first commit.
//
//	go run ./tools/refrandom -out DIR [-first 1 -seeds 8]
//	go run ./tools/refrandom -triage OUTPUT-OF-REFCHECK
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/scenario"
)

func main() {
	out := flag.String("out", "", "folder to write the scenarios to")
	first := flag.Int("first", 1, "first seed")
	seeds := flag.Int("seeds", 8, "seeds per family")
	triage := flag.String("triage", "", "refcheck output to triage instead")
	flag.Parse()
	var err error
	switch {
	case *triage != "":
		var f *os.File
		if f, err = os.Open(*triage); err == nil {
			err = triageOutput(f, os.Stdout)
			f.Close()
		}
	case *out != "":
		err = writeScenarios(*out, *first, *seeds)
	default:
		err = fmt.Errorf("give -out DIR or -triage FILE")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "refrandom:", err)
		os.Exit(1)
	}
}

// families are the generators, by file prefix.
var families = map[string]func(*gen){
	"params": paramsPlay,
	"setup":  setupPlay,
	"config": configPlay,
	"output": outputPlay,
	"shell":  shellPlay,
}

func writeScenarios(dir string, first, seeds int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, play := range families {
		for seed := first; seed < first+seeds; seed++ {
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), uint64(len(name))))}
			play(g)
			text := fmt.Sprintf("# refrandom %s, seed %d\n%s", name, seed, g.b.String())
			path := filepath.Join(dir, fmt.Sprintf("random-%s-%d.scenario", name, seed))
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// gen builds one scenario.
type gen struct {
	r  *rand.Rand
	b  strings.Builder
	id int
}

type obj = map[string]any

// odd are the values members are given: wrong types, numbers as text,
// fractions, out-of-range numbers, blanks, the texts the plugin branches on.
var odd = []any{nil, "", " ", "abc", "5", "-1", "0", "1.5", "1e3", 0, 5, -1, 1.5, 1e20, true, false, "true", "false",
	[]any{}, []any{1}, []any{"a"}, obj{}, obj{"a": 1}, "0x10", "  7  ", "Infinity", "NaN", "\u00e9t\u00e9", "a/b", "../x",
	3600000, 0.0001, -0.5, "120", 9007199254740993.0, "timed_out", "snapshot", 43127, "/api/runner/v1/connect/abc",
	[]any{104, 105}, obj{"length": 2, "0": 65}, 86400001, "us", "python", "not a language"}

func (g *gen) odd() any { return clone(odd[g.r.IntN(len(odd))]) }

func clone(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func (g *gen) pick(keys []string, n int) []string {
	p := g.r.Perm(len(keys))
	out := make([]string, 0, n)
	for _, i := range p[:min(n, len(keys))] {
		out = append(out, keys[i])
	}
	return out
}

func (g *gen) step(st scenario.Step) {
	text, err := st.Format()
	if err != nil {
		panic(err)
	}
	g.b.WriteString(text)
	g.b.WriteByte('\n')
}

// acquireDiffers and probeDiffers declare what any acquire and probe
// differ by (their metadata keys, the attempt name).
var (
	acquireDiffers = map[string][]string{"metadata-config-keys": []string{"$.result.metadata.image", "$.result.metadata.snapshot",
		"$.result.metadata.target", "$.result.metadata.timeoutMs", "$.result.metadata.reuseLease"},
		"create-timeout-cleanup": []string{"$.result.metadata.sandboxName"}}
	probeDiffers = map[string][]string{"create-timeout-cleanup": []string{"$.result.metadata.sandboxName", "$.result.summary"}}
)

func (g *gen) req(method string, params obj, capture map[string]string) {
	g.id++
	msg := obj{"jsonrpc": "2.0", "id": g.id, "method": method, "params": params}
	if method == "environmentExecute" {
		msg["paperclipInvocation"] = obj{"id": "i" + strconv.Itoa(g.id)}
	}
	host, err := json.Marshal(msg)
	if err != nil {
		panic(err)
	}
	st := scenario.Step{Host: host, Capture: capture}
	switch method {
	case "environmentAcquireLease":
		st.Differs = acquireDiffers
	case "environmentProbe":
		st.Differs = probeDiffers
	}
	g.step(st)
}

// acquire asks for a lease of the plain config, capturing from its result
// what capture names (LEASE, the lease id, at least).
func (g *gen) acquire(capture map[string]string) {
	g.req("environmentAcquireLease", with(baseParams(), "config", plainConfig()), capture)
}

func baseParams() obj {
	return obj{"driverKey": "daytona", "companyId": "c-1", "environmentId": "env-1", "runId": "run-1", "config": "${CFG}"}
}

func plainConfig() obj {
	return obj{"apiKey": "${DAYTONA_API_KEY}", "apiUrl": "${DAYTONA_API_URL}"}
}

var configKeys = []string{"timeoutMs", "reuseLease", "language", "target", "snapshot", "image", "cpu", "memory", "disk", "gpu",
	"autoStopInterval", "autoArchiveInterval", "autoDeleteInterval", "livenessTimeoutMs", "env", "labels", "public"}

func (g *gen) oddConfig(n int, credentials bool) obj {
	c := plainConfig()
	keys := configKeys
	if credentials {
		keys = append(append([]string(nil), configKeys...), "apiKey", "apiUrl")
	}
	for _, k := range g.pick(keys, n) {
		c[k] = g.odd()
	}
	return c
}

func with(p obj, kv ...any) obj {
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

// paramsPlay: validation, probes and acquires with odd configs, then
// executes, realizes and lifecycle calls with odd members on one lease.
func paramsPlay(g *gen) {
	for range 8 {
		g.req("environmentValidateConfig", obj{"config": g.oddConfig(1+g.r.IntN(3), g.r.IntN(3) == 0)}, nil)
	}
	for range 2 {
		g.req("environmentProbe", with(baseParams(), "config", g.oddConfig(1+g.r.IntN(3), false)), nil)
	}
	g.acquire(map[string]string{"LEASE": "$.result.providerLeaseId"})
	for range 4 {
		p := with(baseParams(), "config", g.oddConfig(1+g.r.IntN(3), false))
		if g.r.IntN(5) < 2 {
			p[g.pick([]string{"requestedExpiresAt", "issueId", "workspaceMode", "requestedCwd"}, 1)[0]] = g.odd()
		}
		g.req("environmentAcquireLease", p, nil)
	}
	for range 12 {
		p := with(baseParams(), "lease", obj{"providerLeaseId": "${LEASE}"}, "command", "sh",
			"args", []any{"-c", "echo hi; echo err >&2; exit 3"})
		for _, k := range g.pick([]string{"command", "args", "cwd", "env", "stdin", "timeoutMs", "bypassSession"}, 1+g.r.IntN(2)) {
			v := g.odd()
			switch k {
			case "command":
				if s, ok := v.(string); ok && s != "" && strings.TrimSpace(s) == s {
					v = "echo" // never run a random text as a program
				}
			case "args":
				if g.r.IntN(2) == 0 {
					v = []any{"-c", g.odd()}
				}
			case "env":
				if g.r.IntN(5) < 3 {
					v = obj{"A": g.odd(), "B": "x"}
				}
			case "cwd":
				if g.r.IntN(2) == 0 {
					v = []any{"/tmp", "", ".", "relative", "/nonexistent-dir"}[g.r.IntN(5)]
				}
			}
			p[k] = v
		}
		if args, _ := p["args"].([]any); p["command"] == "sh" && (len(args) == 0 || args[0] != "-c") {
			// A shell without -c reads commands from the session's input
			// and never ends (both workers wait out the timeout there).
			p["command"] = "echo"
		}
		if g.r.IntN(5) == 0 {
			p["lease"] = obj{"providerLeaseId": "${LEASE}", "metadata": obj{"remoteCwd": g.odd()}}
		}
		g.req("environmentExecute", p, nil)
	}
	for range 3 {
		// Relative folders only: an absolute one would be made on this machine.
		ws := obj{"localPath": "x", "remotePath": []any{nil, "", "ws-a", "rel", 5, "ws b"}[g.r.IntN(6)]}
		if g.r.IntN(2) == 0 {
			ws[g.pick([]string{"localPath", "mode", "strategy"}, 1)[0]] = g.odd()
		}
		if s, ok := ws["localPath"].(string); ok && strings.HasPrefix(s, "/") {
			ws["localPath"] = "x"
		}
		g.req("environmentRealizeWorkspace", with(baseParams(), "lease", obj{"providerLeaseId": "${LEASE}"}, "workspace", ws), nil)
	}
	for i := range 4 {
		method := []string{"environmentReleaseLease", "environmentResumeLease"}[g.r.IntN(2)]
		if i == 3 {
			method = []string{"environmentReleaseLease", "environmentResumeLease", "environmentDestroyLease"}[g.r.IntN(3)]
		}
		p := baseParams()
		if g.r.IntN(2) == 0 {
			p["providerLeaseId"] = "${LEASE}"
		} else {
			p["providerLeaseId"] = g.odd()
		}
		if g.r.IntN(3) == 0 {
			p["reason"] = g.odd()
		}
		g.req(method, p, nil)
	}
	g.req("environmentDestroyLease", with(baseParams(), "providerLeaseId", "${LEASE}"), nil)
}

// setupPlay: runner ingress, an interactive setup, its polls, captures
// and cancels, and template deletes, with odd members.
func setupPlay(g *gen) {
	g.acquire(map[string]string{"LEASE": "$.result.providerLeaseId"})
	for range 6 {
		p := with(baseParams(), "lease", obj{"providerLeaseId": "${LEASE}"}, "port", 43127, "path", "/api/runner/v1/connect/tok")
		for _, k := range g.pick([]string{"port", "path", "lease", "workerSessionId", "connectionExpiresInMinutes"}, 1+g.r.IntN(2)) {
			if k == "lease" {
				p[k] = []any{obj{"providerLeaseId": g.odd()}, g.odd(), obj{"providerLeaseId": "${LEASE}", "metadata": g.odd()}}[g.r.IntN(3)]
				continue
			}
			p[k] = g.odd()
		}
		g.req("environmentRunnerIngressEndpoint", p, nil)
	}
	g.req("environmentStartInteractiveSetup", baseParams(), map[string]string{"SETUP": "$.result.providerLeaseId"})
	for range 5 {
		method := []string{"environmentGetInteractiveSetup", "environmentGetInteractiveSetup", "environmentCaptureTemplate"}[g.r.IntN(3)]
		keys := []string{"providerLeaseId", "includeConnectionPayload", "connectionExpiresInMinutes", "setupSessionId"}
		if method == "environmentCaptureTemplate" {
			keys = []string{"providerLeaseId", "templateLabel", "timeoutMs", "sourceTemplateRef", "previousTemplateRef"}
		}
		p := with(baseParams(), "providerLeaseId", "${SETUP}")
		for _, k := range g.pick(keys, 1+g.r.IntN(2)) {
			p[k] = g.odd()
		}
		g.req(method, p, nil)
	}
	for range 3 {
		p := with(baseParams(), "templateRef", []any{g.odd(), "no-such-template"}[g.r.IntN(2)])
		if g.r.IntN(2) == 0 {
			p["templateKind"] = g.odd()
		}
		if g.r.IntN(2) == 0 {
			p["reason"] = g.odd()
		}
		g.req("environmentDeleteTemplate", p, nil)
	}
	g.req("environmentCancelInteractiveSetup", with(baseParams(), "providerLeaseId", "${SETUP}", "reason", g.odd()), nil)
	g.req("environmentDestroyLease", with(baseParams(), "providerLeaseId", "${LEASE}"), nil)
}

// configPlay: many validations, probes and acquires of odd configs.
func configPlay(g *gen) {
	for range 25 {
		g.req("environmentValidateConfig", obj{"config": g.oddConfig(1+g.r.IntN(4), g.r.IntN(4) == 0)}, nil)
	}
	for range 4 {
		g.req("environmentProbe", with(baseParams(), "config", g.oddConfig(1+g.r.IntN(3), false)), nil)
	}
	for range 6 {
		g.req("environmentAcquireLease", with(baseParams(), "config", g.oddConfig(1+g.r.IntN(3), false)), nil)
	}
	g.step(scenario.Step{Sandboxes: true, Differs: map[string][]string{"create-timeout-cleanup": {"$"}}})
}

// outputBytes are what outputPlay's commands print: text, the bytes JSON
// escapes, ill-formed UTF-8 (a lone continuation, a cut rune, an overlong
// form, an encoded surrogate, bytes past U+10FFFF), runes of every length
// and the byte-order mark. Not bytes 1 and 2: three in a row are the stream
// markers Daytona's log stream frames output with, which a command printing
// them confuses on both sides alike, differently from run to run.
var outputBytes = [][]byte{
	[]byte("a"), []byte("hello "), []byte("\n"), []byte("\r\n"), []byte("\t"), []byte("\""), []byte("\\"),
	{0}, {3}, {0x1b, '[', '3', '1', 'm'}, {0x7f},
	{0x80}, {0xc3}, {0xe2, 0x82}, {0xf0, 0x9f, 0x98}, {0xc0, 0x80}, {0xed, 0xa0, 0x80}, {0xf4, 0x90, 0x80, 0x80}, {0xff},
	[]byte("\u00e9"), []byte("\u20ac"), []byte("\U0001f600"), []byte("\u2028"), []byte("\ufeff"),
}

// printfBytes is a printf format printing b exactly: octal escapes for
// everything but letters and spaces.
func printfBytes(b []byte) string {
	var f strings.Builder
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == ' ':
			f.WriteByte(c)
		default:
			fmt.Fprintf(&f, "\\%03o", c)
		}
	}
	return f.String()
}

// outputPlay: commands printing odd bytes on both streams, in pieces the
// log stream may frame apart, ending in odd exit codes; now and then a
// long run or a one-shot command (bypassSession). No timeouts: the
// plugin waits a session command out past its timeout (row
// session-command-timeout).
func outputPlay(g *gen) {
	g.acquire(map[string]string{"LEASE": "$.result.providerLeaseId"})
	for range 10 {
		var script []string
		for range 1 + g.r.IntN(6) {
			switch g.r.IntN(8) {
			case 0:
				script = append(script, "sleep 0.0"+strconv.Itoa(1+g.r.IntN(5)))
			case 1:
				// A longer run, over one frame of the log stream.
				script = append(script, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' '%c'", 1+g.r.IntN(200000), 'a'+rune(g.r.IntN(26))))
			default:
				var piece []byte
				for range 1 + g.r.IntN(6) {
					piece = append(piece, outputBytes[g.r.IntN(len(outputBytes))]...)
				}
				redirect := ""
				if g.r.IntN(3) == 0 {
					redirect = " >&2"
				}
				script = append(script, "printf '"+printfBytes(piece)+"'"+redirect)
			}
		}
		script = append(script, "exit "+strconv.Itoa([]int{0, 0, 1, 2, 3, 127, 128, 255}[g.r.IntN(8)]))
		p := with(baseParams(), "lease", obj{"providerLeaseId": "${LEASE}"}, "command", "sh", "args", []any{"-c", strings.Join(script, "; ")})
		if g.r.IntN(6) == 0 {
			p["bypassSession"] = true
		}
		g.req("environmentExecute", p, nil)
	}
	g.req("environmentDestroyLease", with(baseParams(), "providerLeaseId", "${LEASE}"), nil)
}

// shellTexts are the values shellPlay quotes into a command's script:
// what a shell would expand, split, glob or end a quote on, and text the
// quoting must carry whole.
var shellTexts = []string{"", " ", "x y", "'", "''", "\"", "$HOME", "${HOME:-x}", "$(echo hi)", "`echo hi`", "\\", "\\n",
	"line\nbreak", "tab\there", "\r", "*", "?", "~", "~root", "-n", "--", "a;b", "a&&b", "a|b", "a>b", "#x", "!x", "%s",
	"\u00e9t\u00e9", "\U0001f600", "\u2028", "\ufeff", "\u0001", "\u007f", "=", "a=b"}

// shellKeys are the environment names shellPlay sets: valid ones, the
// plugin's own git defaults (which the caller's override), and names its
// check refuses.
var shellKeys = []string{"A", "_x", "A1", "LANG", "GIT_TERMINAL_PROMPT", "GIT_ASKPASS", "1A", "A-B", "A B", "", "\u00e9", "a=b"}

// shellPlay: commands whose argv, environment and folder carry texts the
// plugin's shell quoting must keep whole, run in the session and one-shot;
// what reaches the command is printed back.
func shellPlay(g *gen) {
	g.acquire(map[string]string{"LEASE": "$.result.providerLeaseId", "CWD": "$.result.metadata.remoteCwd"})
	text := func() string { return shellTexts[g.r.IntN(len(shellTexts))] }
	for range 12 {
		p := with(baseParams(), "lease", obj{"providerLeaseId": "${LEASE}"})
		switch g.r.IntN(4) {
		case 0: // argv, printed one per line between brackets
			args := []any{"[%s]\\n"}
			for range 1 + g.r.IntN(4) {
				args = append(args, text())
			}
			p["command"], p["args"] = "printf", args
		case 1: // the environment, printed back by name
			env := obj{}
			var names []any
			for range 1 + g.r.IntN(3) {
				k := shellKeys[g.r.IntN(len(shellKeys))]
				env[k] = text()
				names = append(names, k)
			}
			if g.r.IntN(4) == 0 {
				env["B"] = g.odd() // a value that is no string is left out
				names = append(names, "B")
			}
			p["command"], p["args"], p["env"] = "printenv", names, env
		case 2: // the folder the command runs in
			p["command"], p["args"] = "pwd", []any{}
			p["cwd"] = []any{"${CWD}", "${CWD}/", "/tmp", "/", ".", "..", "~", "$HOME", "no such dir", "${CWD}/a b", " "}[g.r.IntN(11)]
		default: // the command's own name
			p["command"] = []string{"echo", " echo", "echo ", "/bin/echo", "./echo", "e'cho", "echo;id", "$(echo echo)", "ECHO"}[g.r.IntN(9)]
			p["args"] = []any{text()}
		}
		if g.r.IntN(4) == 0 {
			p["bypassSession"] = true
		}
		if g.r.IntN(5) == 0 {
			p["stdin"] = text()
		}
		g.req("environmentExecute", p, nil)
	}
	g.req("environmentDestroyLease", with(baseParams(), "providerLeaseId", "${LEASE}"), nil)
}

// triageOutput prints the steps of a refcheck output where the two sides
// differ, leaving out those that differ only as the commonest documented
// difference does: both fail, the plugin with -32002 (the TypeError it ran
// into), this worker with -32602 (invalid params).
func triageOutput(r io.Reader, w io.Writer) error {
	type diff struct{ path, ref, ours string }
	type step struct {
		scenario, label string
		diffs           []diff
	}
	var steps []*step
	var scenario string
	head := regexp.MustCompile(`^different\s+(\S+)`)
	at := regexp.MustCompile(`^    (line \d+ \(\w+\)): (\S+)$`)
	side := regexp.MustCompile(`^      (reference|worker):\s+(.*)$`)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := head.FindStringSubmatch(line); m != nil {
			scenario = m[1]
			continue
		}
		if m := at.FindStringSubmatch(line); m != nil {
			if n := len(steps); n == 0 || steps[n-1].label != m[1] || steps[n-1].scenario != scenario {
				steps = append(steps, &step{scenario: scenario, label: m[1]})
			}
			s := steps[len(steps)-1]
			s.diffs = append(s.diffs, diff{path: m[2]})
			continue
		}
		if m := side.FindStringSubmatch(line); m != nil && len(steps) > 0 {
			s := steps[len(steps)-1]
			d := &s.diffs[len(s.diffs)-1]
			if m[1] == "reference" {
				d.ref = m[2]
			} else {
				d.ours = m[2]
			}
			continue
		}
		if strings.HasPrefix(line, "    harness") {
			fmt.Fprintln(w, scenario, strings.TrimSpace(line))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	shown := 0
	for _, s := range steps {
		invalidParams := true
		for _, d := range s.diffs {
			switch {
			case d.path == "$.error.code" && d.ref == "-32002" && d.ours == "-32602":
			case d.path == "$.error.message":
			default:
				invalidParams = false
			}
		}
		if invalidParams && len(s.diffs) == 2 {
			continue
		}
		shown++
		fmt.Fprintf(w, "%s %s\n", s.scenario, s.label)
		for _, d := range s.diffs {
			fmt.Fprintf(w, "    %s\n      reference: %.300s\n      worker:    %.300s\n", d.path, d.ref, d.ours)
		}
	}
	fmt.Fprintf(w, "refrandom: %d steps differ beyond invalid params\n", shown)
	return nil
}
