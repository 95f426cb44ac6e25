package shell

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const profilePrefix = `if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi && ` +
	`if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi && ` +
	`if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi && ` +
	`if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi && `

const gitDefaults = `GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='echo' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force'`

func TestLoginShellScriptIsTheReferenceScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		args    []string
		cwd     string
		env     string
		stdin   string
		want    string
	}{
		{name: "plain", command: "npm", args: []string{"test"},
			want: profilePrefix + `env ` + gitDefaults + ` 'npm' 'test'`},
		{name: "cwd and stdin", command: "bash", args: []string{"-lc", "cat"}, cwd: "/home/daytona/ws", stdin: "/tmp/paperclip-stdin-1",
			want: profilePrefix + `cd '/home/daytona/ws' && env ` + gitDefaults + ` 'bash' '-lc' 'cat' < '/tmp/paperclip-stdin-1'`},
		{name: "caller env overrides in place and appends in order", command: "x",
			env:  `{"Z_LAST":"z","GIT_ASKPASS":"/bin/false","A":"it's"}`,
			want: profilePrefix + `env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='/bin/false' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' Z_LAST='z' A='it'"'"'s' 'x'`},
		{name: "non-string env values are dropped", command: "x", env: `{"N":1,"B":true,"S":"s"}`,
			want: profilePrefix + `env ` + gitDefaults + ` S='s' 'x'`},
		{name: "quotes everywhere", command: "printf", args: []string{"%s\n", "a'b", `$HOME`, "`x`", "new\nline", ""},
			want: profilePrefix + `env ` + gitDefaults + ` 'printf' '%s` + "\n" + `' 'a'"'"'b' '$HOME' '` + "`x`" + `' 'new` + "\n" + `line' ''`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, err := Env(json.RawMessage(tt.env))
			require.NoError(t, err)
			got, err := LoginScript(tt.command, tt.args, tt.cwd, env, tt.stdin)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLoginShellScriptRejectsInvalidEnvKeys(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"BAD-KEY", "1X", "", "A B", "ü"} {
		env := []Var{{Key: key, Value: "v", Set: true}}
		_, err := LoginScript("true", nil, "", env, "")
		assert.EqualError(t, err, "Invalid sandbox environment variable key: "+key)
	}
}

func TestOrderedEnvKeepsFirstPositionOfRepeatedKeys(t *testing.T) {
	t.Parallel()
	env, err := Env(json.RawMessage(`{"A":"1","B":"2","A":"3"}`))
	require.NoError(t, err)
	assert.Equal(t, []Var{{Key: "A", Value: "3", Set: true}, {Key: "B", Value: "2", Set: true}}, env)
	// Object.keys of an array or a string lists its indices; of a number,
	// nothing. An object lists its index keys first.
	env, err = Env(json.RawMessage(`["A","B"]`))
	require.NoError(t, err)
	assert.Equal(t, []Var{{Key: "0"}, {Key: "1"}}, env)
	env, err = Env(json.RawMessage(`"é😀"`))
	require.NoError(t, err)
	assert.Len(t, env, 3, "UTF-16 code units")
	env, err = Env(json.RawMessage(`7`))
	require.NoError(t, err)
	assert.Empty(t, env)
	env, err = Env(json.RawMessage(`{"-x":"1","10":"2","9":"3"}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"9", "10", "-x"}, []string{env[0].Key, env[1].Key, env[2].Key})
	_, err = LoginScript("true", nil, "", env, "")
	assert.EqualError(t, err, "Invalid sandbox environment variable key: 9")
}

func TestIsGitNetworkCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		args    []string
		want    bool
	}{
		{"git", []string{"push"}, true},
		{"/usr/bin/git", []string{"fetch", "origin"}, true},
		{"git", []string{"-C", "/repo", "pull"}, true},
		{"git", []string{"-c", "http.proxy=x", "--git-dir", "/r/.git", "--work-tree", "/r", "ls-remote"}, true},
		{"git", []string{"--no-pager", "clone", "u"}, true},
		{"git", []string{"remote", "-v", "update"}, true},
		{"git", []string{"remote", "add", "o", "u"}, false},
		{"git", []string{"submodule", "update", "--init"}, true},
		{"git", []string{"submodule", "status"}, false},
		{"git", []string{"status"}, false},
		{"git", []string{"-C", "push"}, false},
		{"git", nil, false},
		{"gitx", []string{"push"}, false},
		{"bash", []string{"-c", "git push"}, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsGitNetworkCommand(tt.command, tt.args), "%s %v", tt.command, tt.args)
	}
}

// The hand-written matcher agrees with the pattern it replaces.
func TestEnvKeyMatcherAgreesWithItsPattern(t *testing.T) {
	t.Parallel()
	inputs := []string{"", "a", "A", "_", "0", "a0", "_9", "9a", "a-b", "a.b", "a+b", "A_B", "x y", "é", "a\x00",
		"ab@", "[x", "`", "{", "http", "HTTPS", "git+ssh", "ws.x", "-a", "+a", ".a", "aZ09_", "Z", "z"}
	for i := 0; i < 256; i++ {
		inputs = append(inputs, string(rune(i)), "a"+string([]byte{byte(i)}), string([]byte{byte(i)}))
	}
	envKey := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, s := range inputs {
		assert.Equal(t, envKey.MatchString(s), isShellEnvKey(s), "env key %q", s)
	}
}
