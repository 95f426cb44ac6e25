package refcheck

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/differences"
	"github.com/paperclipai/daytona-worker/internal/scenario"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	return decodeLine([]byte(s))
}

func TestNormalizeReplacesEachSidesVolatileValues(t *testing.T) {
	t.Parallel()
	r := newReplacer(map[string]string{
		"DAYTONA_API_URL": "http://127.0.0.1:4242/api",
		"EMULATOR_ADDR":   "127.0.0.1:4242",
		"EMULATOR_ROOT":   "/tmp/refcheck-emulator-123",
	})
	v := r.normalize(decode(t, `{"result":{"metadata":{"remoteCwd":"/tmp/refcheck-emulator-123/sandboxes/0b7a1c9e-1111-4222-8333-944455556666/home",
		"url":"http://127.0.0.1:4242/api/sandbox","at":"2026-01-02T03:04:05.678Z","durationMs":17,"getDurationMs":0,"exitCode":0,"n":1.0},
		"command":"ssh KcHnxnG50oOYH47j9VwMS0uMxUCMBznB@ssh.app.daytona.io","generation":"19a4200e891868925147b9200e12642dafee936d53040dd1c71dcb9bd2f8e5ac",
		"token":"ae30b260a6ccc0efcb8f8ee50175527b930500b02a45225547bbe9081eeb1226",
		"templateRef":"paperclip-env-1-7bf62915","other":{"templateRef":"my-template-7bf62915"},
		"stderr":"/tmp/refcheck-emulator-123/sandboxes/0b7a1c9e-1111-4222-8333-944455556666/daemon/sessions/paperclip-0b7a1c9e-1111-4222-8333-944455556666-32893656/0b7a1c9e-1111-4222-8333-944455556666/cmd.sh: line 1: cd: x: No such file or directory"}}`))
	want := decode(t, `{"result":{"metadata":{"remoteCwd":"${EMULATOR_ROOT}/sandboxes/<uuid>/home",
		"url":"${DAYTONA_API_URL}/sandbox","at":"<iso8601>","durationMs":"<ms>","getDurationMs":"<ms>","exitCode":0,"n":1.0},
		"command":"ssh <token>@ssh.app.daytona.io","generation":"<hex64>",
		"token":"ae30b260a6ccc0efcb8f8ee50175527b930500b02a45225547bbe9081eeb1226",
		"templateRef":"paperclip-env-1-<hex8>","other":{"templateRef":"my-template-7bf62915"},
		"stderr":"${EMULATOR_ROOT}/sandboxes/<uuid>/daemon/sessions/paperclip-<uuid>-<hex8>/<uuid>/cmd.sh: line 1: cd: x: No such file or directory"}}`)
	assert.Empty(t, diffOutputs([]any{want}, []any{v}))
}

// A span.record's times and its wall-time attributes are timings too.
func TestNormalizeSpanTimings(t *testing.T) {
	t.Parallel()
	r := newReplacer(nil)
	v := r.normalize(decode(t, `{"method":"span.record","params":{"name":"transfer","startTimeMs":1796184975459,"endTimeMs":1796184975467,
		"attributes":{"paperclip.sandbox.startup.transfer.wall_ms":9,"paperclip.sandbox.startup.transfer.guard.count":1,"paperclip.sandbox.startup.provider":"daytona"}}}`))
	want := decode(t, `{"method":"span.record","params":{"name":"transfer","startTimeMs":"<ms>","endTimeMs":"<ms>",
		"attributes":{"paperclip.sandbox.startup.transfer.wall_ms":"<ms>","paperclip.sandbox.startup.transfer.guard.count":1,"paperclip.sandbox.startup.provider":"daytona"}}}`)
	assert.Empty(t, diffOutputs([]any{want}, []any{v}))
}

func TestJoinExecuteLogsIgnoresChunking(t *testing.T) {
	t.Parallel()
	chunked := []any{
		decode(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stdout","chunk":"he"},"paperclipInvocationId":"i"}`),
		decode(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stderr","chunk":"oops"},"paperclipInvocationId":"i"}`),
		decode(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stdout","chunk":"llo"},"paperclipInvocationId":"i"}`),
		decode(t, `{"jsonrpc":"2.0","id":3,"result":{}}`),
	}
	whole := []any{
		decode(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stdout","chunk":"hello"},"paperclipInvocationId":"i"}`),
		decode(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stderr","chunk":"oops"},"paperclipInvocationId":"i"}`),
		decode(t, `{"jsonrpc":"2.0","id":3,"result":{}}`),
	}
	assert.Empty(t, diffOutputs(joinExecuteLogs(whole), joinExecuteLogs(chunked)))
	other := []any{decode(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stdout","chunk":"hellO"},"paperclipInvocationId":"i"}`), whole[1], whole[2]}
	assert.NotEmpty(t, diffOutputs(joinExecuteLogs(whole), joinExecuteLogs(other)))
}

func TestDiffOutputsNamesEveryPath(t *testing.T) {
	t.Parallel()
	a := []any{decode(t, `{"id":1,"result":{"x":1,"y":[1,2],"z":"a"}}`)}
	b := []any{decode(t, `{"id":1,"result":{"x":1.0,"y":[1,3],"w":true}}`), decode(t, `{"extra":1}`)}
	var paths []string
	for _, d := range diffOutputs(a, b) {
		paths = append(paths, d.Path)
	}
	assert.Equal(t, []string{"$.result.w", "$.result.y[1]", "$.result.z", "$lines"}, paths)
}

func TestCoversAndLookup(t *testing.T) {
	t.Parallel()
	assert.True(t, covers("$", "$.error.message"))
	assert.True(t, covers("$.result.metadata", "$.result.metadata.sandboxName"))
	assert.True(t, covers("$.result.items", "$.result.items[2].id"))
	assert.False(t, covers("$.result.meta", "$.result.metadata"))
	assert.False(t, covers("$.result", "$lines"))
	v := decode(t, `{"result":{"items":[{"id":"a"},{"id":"b"}],"n":null}}`)
	got, err := lookup(v, "$.result.items[1].id")
	require.NoError(t, err)
	assert.Equal(t, "b", got)
	_, err = lookup(v, "$.result.missing")
	assert.Error(t, err)
	_, err = lookup(v, "$.result.items[5]")
	assert.Error(t, err)
}

func testList(t *testing.T) *differences.List {
	t.Helper()
	l, err := differences.Parse(strings.NewReader("id: probe-name\nsituation: s\nnode: n\nours: o\n\nid: other\nsituation: s\nnode: n\nours: o\n"))
	require.NoError(t, err)
	return l
}

func TestCompareClassifies(t *testing.T) {
	t.Parallel()
	list := testList(t)
	sc := &Scenario{Name: "s", Steps: []Step{
		{Line: 1, Host: json.RawMessage(`{"id":1,"method":"m"}`), Differs: map[string][]string{"probe-name": {"$.result.summary"}}},
		{Line: 2, Host: json.RawMessage(`{"id":2,"method":"m"}`)},
	}}
	out := func(lines ...string) *StepOutput {
		o := &StepOutput{}
		for _, l := range lines {
			o.Lines = append(o.Lines, decode(t, l))
		}
		return o
	}
	same := []*StepOutput{out(`{"id":1,"result":{"summary":"a"}}`), out(`{"id":2,"result":1}`)}
	r := Compare(sc, same, same, list)
	assert.Equal(t, Identical, r.Verdict)
	assert.Equal(t, []string{"line 1: probe-name"}, r.Stale)

	documented := []*StepOutput{out(`{"id":1,"result":{"summary":"b"}}`), out(`{"id":2,"result":1}`)}
	r = Compare(sc, same, documented, list)
	assert.Equal(t, Documented, r.Verdict)
	assert.Equal(t, []string{"probe-name"}, r.Rows)

	different := []*StepOutput{out(`{"id":1,"result":{"summary":"b"}}`), out(`{"id":2,"result":2}`)}
	r = Compare(sc, same, different, list)
	assert.Equal(t, Different, r.Verdict)
	require.Len(t, r.Undocumented, 1)
	assert.Equal(t, "$.result", r.Undocumented[0].Path)
	var b strings.Builder
	r.Print(&b, list)
	assert.Contains(t, b.String(), "different   s\n    line 2 (m): $.result\n      reference: 1\n      worker:    2\n")

	sc.Steps[1].Differs = map[string][]string{"no-such-row": {"$"}}
	r = Compare(sc, same, same, list)
	assert.Equal(t, Different, r.Verdict)
	assert.Contains(t, r.Problem, `"no-such-row", which is no row of differences.txt`)
}

func TestLoadRejectsMalformedScenarios(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct{ text, want string }{
		"unknown step": {`expect {"id":1}`, `unknown step "expect"`},
		"expectation":  {"host {\"id\":1}\nworker {\"id\":1}", "holds no expectations"},
		"late setup":   {"sandboxes\nscenario {}", "must come first"},
		"bad path":     {"host {\"id\":1}\n  differs {\"r\":[\"result\"]}", "must start with $"},
		"capture hook": {"hook clear-faults\n  capture {\"X\":\"$.a\"}", "takes no options"},
		"unknown hook": {"hook explode", `unknown hook "explode"`},
		"bad fault":    {`hook fault {"stauts":500}`, `unknown field "stauts"`},
		"empty":        {"# nothing\n", "no steps"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".scenario")
		require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
		_, err := Load(path)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}

// The project's scenarios parse, and every row they cite is in the list.
func TestScenariosCiteExistingRows(t *testing.T) {
	t.Parallel()
	list, err := differences.Load("../../differences.txt")
	require.NoError(t, err)
	scenarios, err := LoadDir("../../testdata/refcheck")
	require.NoError(t, err)
	syncScenarios, err := LoadDir("../../testdata/refcheck-sync")
	require.NoError(t, err)
	for _, sc := range append(scenarios, syncScenarios...) {
		for _, st := range sc.Steps {
			for row := range st.Differs {
				_, ok := list.ByID(row)
				assert.True(t, ok, "%s:%d cites %q, which is no row of differences.txt", sc.Path, st.Line, row)
			}
		}
	}
}

// Played through daytona-worker on both sides (two emulators, two
// processes), a scenario comes out identical: normalisation removes
// everything that differs between runs, so what refcheck reports is the
// workers' doing.
func TestSameWorkerOnBothSidesIsIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the worker")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "daytona-worker")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/daytona-worker")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	list, err := differences.Load("../../differences.txt")
	require.NoError(t, err)
	// sync-disk: each side's own ${HOST_DIR} and sandbox folder, listed by
	// files steps, come out the same once normalised.
	for _, name := range []string{"refcheck/acquire-basic", "refcheck/execute-basic", "refcheck/sync-disk", "refcheck-sync/sync-in-out-basics"} {
		sc, err := Load(filepath.Join("../../testdata", name+".scenario"))
		require.NoError(t, err)
		var (
			wg   sync.WaitGroup
			outs [2][]*StepOutput
			errs [2]error
		)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = Play(context.Background(), sc, Command{Argv: []string{bin}}, Options{}, "worker")
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		r := Compare(sc, outs[0], outs[1], list)
		var b strings.Builder
		r.Print(&b, list)
		if !assert.Equal(t, Identical, r.Verdict, "%s", b.String()) {
			// A declared row can hide what differed: show the steps.
			for i := range outs[0] {
				ref, _ := json.Marshal(outs[0][i])
				ours, _ := json.Marshal(outs[1][i])
				if string(ref) != string(ours) {
					t.Logf("%s: step %d differs:\n%s\n%s", name, i, ref, ours)
				}
			}
		}
		for _, o := range outs[0] {
			if o != nil {
				for _, l := range o.Lines {
					b, _ := json.Marshal(l)
					assert.NotContains(t, string(b), "no reply", name)
				}
			}
		}
	}
}

// A files step lists a folder's tree: types, modes (special bits too),
// sizes and digests of files, link targets; a missing folder says so.
func TestFilesLineListsATree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d é/empty"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d é/f"), []byte("hi"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(root, "d é/f"), os.ModeSetuid|0o755))
	require.NoError(t, os.Symlink("d é/f", filepath.Join(root, "link")))
	require.NoError(t, os.Chmod(root, 0o700))
	got := decodeLine(filesLine(root))
	want := decode(t, `{"files":[
		{"path":".","type":"dir","mode":"0700"},
		{"path":"d é","type":"dir","mode":"0750"},
		{"path":"d é/empty","type":"dir","mode":"0750"},
		{"path":"d é/f","type":"file","mode":"4755","size":2,"sha256":"8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"},
		{"path":"link","type":"symlink","mode":"0777","link":"d é/f"}]}`)
	assert.Empty(t, diffOutputs([]any{want}, []any{got}))
	assert.Empty(t, diffOutputs([]any{decode(t, `{"files":null,"error":"missing"}`)}, []any{decodeLine(filesLine(filepath.Join(root, "nope")))}))
	assert.Empty(t, diffOutputs([]any{decode(t, `{"files":null,"error":"not a folder"}`)}, []any{decodeLine(filesLine(filepath.Join(root, "link")))}))
}

// Each side gets its own ${HOST_DIR}, normalised back to its name; a files
// step's path takes variables.
func TestHostDirIsPerSideAndNormalised(t *testing.T) {
	t.Parallel()
	a, err := newHostDir()
	require.NoError(t, err)
	defer removeHostDir(a)
	b, err := newHostDir()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(b, "ro/sub"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(b, "ro"), 0o555))
	removeHostDir(b)
	_, err = os.Stat(b)
	assert.True(t, os.IsNotExist(err), "a side's folder is removed, read-only folders and all")
	assert.NotEqual(t, a, b)
	r := newReplacer(map[string]string{"HOST_DIR": a})
	assert.Equal(t, "${HOST_DIR}/x", r.string(a+"/x"))
	require.NoError(t, os.MkdirAll(filepath.Join(a, "s t"), 0o755))
	st := &Step{Files: "${HOST_DIR}/${SUB}"}
	line, err := filesStepLine(st, scenario.Vars{"HOST_DIR": scenario.StringVar(a), "SUB": scenario.StringVar("s t")})
	require.NoError(t, err)
	out, err := finish(st, [][]byte{line}, -1, scenario.Vars{}, r)
	require.NoError(t, err)
	assert.Empty(t, diffOutputs([]any{decode(t, `{"files":[{"path":".","type":"dir","mode":"0755"}]}`)}, out.Lines))
}
