// Command mutate checks that the test suite guards the safety nets listed in
// mutations.txt: it applies each one-line mutation alone to a scratch copy
// of the repository, runs `make test` there (vet, then every test with the
// race detector, as CI does), and reports the mutation killed when the suite
// fails and survived when it passes. It exits 1 if any survived.
//
//	go run ./tools/mutate [-list tools/mutate/mutations.txt] [-run REGEXP] [-keep]
//	                      [-suite 'go test -race -count=1 -run TestX ./worker/']
//
// The unmutated copy is tested first: a suite that fails without mutations
// would make every mutation look killed. Run it from the repository root;
// `make mutate` does. It takes one full suite run per mutation; -suite runs
// a narrower command instead while a test is being written (the verdict that
// counts is make test's).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// mutation is one line of one file replaced.
type mutation struct {
	name     string
	file     string
	old, new string // trimmed of indentation
	at       int    // line number in the list, for errors
}

func main() {
	list := flag.String("list", "tools/mutate/mutations.txt", "the mutation list")
	run := flag.String("run", "", "only mutations whose name matches this regexp")
	keep := flag.Bool("keep", false, "keep the scratch copy (its path is printed)")
	skipBaseline := flag.Bool("skip-baseline", false, "do not test the unmutated copy first")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound on one suite run")
	suiteCmd := flag.String("suite", "make --no-print-directory test", "the command that must fail on a mutated copy (run with sh -c)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := mutate(ctx, *list, *run, *suiteCmd, *keep, *skipBaseline, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func mutate(ctx context.Context, listPath, only, suiteCmd string, keep, skipBaseline bool, timeout time.Duration) (int, error) {
	muts, err := readList(listPath)
	if err != nil {
		return 0, err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return 0, fmt.Errorf("-run: %w", err)
		}
		var picked []mutation
		for _, m := range muts {
			if re.MatchString(m.name) {
				picked = append(picked, m)
			}
		}
		muts = picked
	}
	if len(muts) == 0 {
		return 0, errors.New("no mutation to apply")
	}
	originals := map[string][]byte{}
	for _, m := range muts {
		if _, ok := originals[m.file]; ok {
			continue
		}
		b, err := os.ReadFile(m.file)
		if err != nil {
			return 0, err
		}
		originals[m.file] = b
	}
	// Every mutation must apply before any suite runs: a list that no
	// longer matches the code is the first thing to fix.
	for _, m := range muts {
		if _, err := m.apply(originals[m.file]); err != nil {
			return 0, err
		}
	}

	scratch, err := os.MkdirTemp("", "daytona-worker-mutate-")
	if err != nil {
		return 0, err
	}
	if keep {
		fmt.Println("scratch copy:", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}
	if err := copyTree(scratch); err != nil {
		return 0, err
	}

	if !skipBaseline {
		fmt.Printf("baseline: %s on the unmutated copy ...\n", suiteCmd)
		failed, out, err := suite(ctx, scratch, suiteCmd, timeout)
		if err != nil {
			return 0, err
		}
		if failed {
			os.Stdout.Write(tail(out, 60))
			return 0, errors.New("the unmutated suite fails; fix that first")
		}
		fmt.Println("baseline: passes")
	}

	survived, invalid := 0, 0
	fmt.Printf("\n%-75s %s\n", "MUTATION", "RESULT")
	for _, m := range muts {
		mutated, _ := m.apply(originals[m.file])
		dst := filepath.Join(scratch, m.file)
		if err := os.WriteFile(dst, mutated, 0o644); err != nil {
			return 0, err
		}
		start := time.Now()
		failed, out, err := suite(ctx, scratch, suiteCmd, timeout)
		if werr := os.WriteFile(dst, originals[m.file], 0o644); werr != nil && err == nil {
			err = werr
		}
		if err != nil {
			return 0, err
		}
		took := time.Since(start).Round(time.Second)
		switch {
		case failed && brokeBuild(out):
			// Killed by the compiler or vet proves nothing about the tests.
			invalid++
			fmt.Printf("%-75s INVALID: it does not build or vet (%s)\n", m.name, strings.Join(failures(out), ", "))
		case failed:
			fmt.Printf("%-75s killed in %s by %s\n", m.name, took, strings.Join(failures(out), ", "))
		default:
			survived++
			fmt.Printf("%-75s SURVIVED (%s)\n", m.name, took)
		}
	}
	fmt.Printf("\n%d mutations: %d killed, %d survived, %d invalid\n", len(muts), len(muts)-survived-invalid, survived, invalid)
	if survived > 0 || invalid > 0 {
		return 1, nil
	}
	return 0, nil
}

// readList parses the mutation list.
func readList(path string) ([]mutation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mutation
	var cur *mutation
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || (strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, "##")):
		case strings.HasPrefix(trimmed, "## "):
			out = append(out, mutation{name: strings.TrimSpace(trimmed[3:]), at: n})
			cur = &out[len(out)-1]
		case cur == nil:
			return nil, fmt.Errorf("%s:%d: %q before the first \"## name\"", path, n, trimmed)
		case strings.HasPrefix(trimmed, "file:"):
			cur.file = strings.TrimSpace(strings.TrimPrefix(trimmed, "file:"))
		case strings.HasPrefix(trimmed, "- "):
			cur.old = strings.TrimSpace(trimmed[2:])
		case strings.HasPrefix(trimmed, "+ "):
			cur.new = strings.TrimSpace(trimmed[2:])
		default:
			return nil, fmt.Errorf("%s:%d: cannot read %q", path, n, trimmed)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, m := range out {
		if m.file == "" || m.old == "" || m.new == "" {
			return nil, fmt.Errorf("%s:%d: mutation %q needs file:, - and + lines", path, m.at, m.name)
		}
	}
	return out, nil
}

// apply replaces the one line of src that reads m.old (indentation aside).
func (m mutation) apply(src []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	hit := -1
	for i, l := range lines {
		if strings.TrimSpace(l) != m.old {
			continue
		}
		if hit >= 0 {
			return nil, fmt.Errorf("mutation %q: %q occurs more than once in %s", m.name, m.old, m.file)
		}
		hit = i
	}
	if hit < 0 {
		return nil, fmt.Errorf("mutation %q: %q is not in %s (the code moved: update the list)", m.name, m.old, m.file)
	}
	l := lines[hit]
	indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
	end := ""
	if strings.HasSuffix(l, "\n") {
		end = "\n"
	}
	lines[hit] = indent + m.new + end
	return []byte(strings.Join(lines, "")), nil
}

// copyTree copies the repository's files (tracked, and untracked ones git
// does not ignore: the work in progress is what gets checked) into dst.
func copyTree(dst string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if err := copyFile(name, filepath.Join(dst, name), info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// suite runs the suite command in dir; failed reports that it failed (a
// build failure is a failure: the mutation broke the code).
func suite(ctx context.Context, dir, command string, timeout time.Duration) (failed bool, out []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	// Its own process group, so a cancelled run takes the test binaries and
	// the workers they started with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return false, buf.Bytes(), fmt.Errorf("%s: %w", command, ctx.Err())
	}
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		return true, buf.Bytes(), nil
	}
	return false, buf.Bytes(), runErr
}

// brokeBuild reports a suite that failed before any test could: the
// mutated code does not compile or does not pass vet.
func brokeBuild(out []byte) bool {
	return buildFailed.Match(out)
}

var buildFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+\s+\[(build|setup) failed\]$|^# \S+\n(\S+\.go:\d+:\d+: |vet: )`)

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)|^FAIL\s+(\S+)\s+\[build failed\]|^(vet): `)

// failures names what failed in a suite's output.
func failures(out []byte) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		name := string(m[1])
		switch {
		case len(m[2]) > 0:
			name = "build of " + string(m[2])
		case len(m[3]) > 0:
			name = "go vet"
		}
		// A failed subtest's parent fails too; name the subtest only.
		if seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	var leaves []string
	for _, n := range names {
		parent := false
		for _, o := range names {
			if o != n && strings.HasPrefix(o, n+"/") {
				parent = true
				break
			}
		}
		if !parent {
			leaves = append(leaves, n)
		}
	}
	if len(leaves) == 0 {
		return []string{"the suite (see its output)"}
	}
	return leaves
}

func tail(b []byte, lines int) []byte {
	all := bytes.SplitAfter(b, []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return bytes.Join(all, nil)
}
