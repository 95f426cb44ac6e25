package daytona

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestToolboxBaseTrimsSlash(t *testing.T) {
	t.Parallel()
	c, _, _, _ := setup(t)
	for _, proxy := range []string{"https://proxy.app.daytona.io/toolbox", "https://proxy.app.daytona.io/toolbox/", "https://proxy.app.daytona.io/toolbox//"} {
		tb := c.ToolboxFor("sb-1", proxy)
		u, err := tb.endpoint(t.Context(), "process", "execute")
		if err != nil || u.String() != "https://proxy.app.daytona.io/toolbox/sb-1/process/execute" {
			t.Errorf("%s → %v, %v", proxy, u, err)
		}
	}
}

func TestExecute(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/process/execute", func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		body := string(data)
		switch {
		case strings.Contains(body, `"command":"new"`):
			if body != `{"command":"new","cwd":"/w","envs":{"A":"1"},"timeout":2}` {
				t.Errorf("body = %s", body)
			}
			writeJSON(w, 200, map[string]any{"exitCode": 3, "result": "out"})
		case strings.Contains(body, `"command":"old"`):
			writeJSON(w, 200, map[string]any{"code": 7, "result": "legacy"})
		case strings.Contains(body, `"command":"zero"`):
			writeJSON(w, 200, map[string]any{"result": "ok"})
		case body == `{"command":"  "}`:
			writeJSON(w, 400, map[string]any{"statusCode": 400, "message": "bad request: command cannot be empty or whitespace-only", "code": "BAD_REQUEST"})
		case strings.Contains(body, `"command":"slow"`):
			writeJSON(w, 408, map[string]any{"statusCode": 408, "message": "request timeout: command execution timeout", "code": "REQUEST_TIMEOUT"})
		}
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	ctx := t.Context()
	res, err := tb.Execute(ctx, ExecuteRequest{Command: "new", Cwd: "/w", Env: map[string]string{"A": "1"}, Timeout: 1500 * time.Millisecond})
	if err != nil || res.ExitCode != 3 || res.Result != "out" {
		t.Fatal(res, err)
	}
	if res, err := tb.Execute(ctx, ExecuteRequest{Command: "old"}); err != nil || res.ExitCode != 7 {
		t.Error(res, err)
	}
	if res, err := tb.Execute(ctx, ExecuteRequest{Command: "zero"}); err != nil || res.ExitCode != 0 {
		t.Error(res, err)
	}
	_, err = tb.Execute(ctx, ExecuteRequest{Command: "slow", Timeout: time.Second})
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("err = %v", err)
	}
	// A blank command is Daytona's to refuse, as the SDK leaves it.
	if _, err := tb.Execute(ctx, ExecuteRequest{Command: "  "}); err == nil || !errors.Is(err, ErrBadRequest) {
		t.Errorf("blank command: %v", err)
	}
}

// A daemon may put raw ill-formed UTF-8 in a JSON string (command output);
// the SDK decodes the body as text first, so each maximal subpart becomes
// one U+FFFD (encoding/json alone gives one per byte).
func TestExecuteIllFormedUTF8DecodedAsTheSDKDoes(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/process/execute", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{\"exitCode\":0,\"result\":\"A\xe2\x82xB I\xf0\x9f\x98J C\xed\xa0\x80D end\xe2\x82\"}"))
	})
	res, err := c.ToolboxFor("sb", srv.URL+"/toolbox").Execute(t.Context(), ExecuteRequest{Command: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "A\ufffdxB I\ufffdJ C\ufffd\ufffd\ufffdD end\ufffd"; res.Result != want {
		t.Errorf("result %q, want %q", res.Result, want)
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/process/session", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"sessionId":"s1"}`)
		w.WriteHeader(201)
	})
	mux.HandleFunc("POST /toolbox/sb/process/session/s1/exec", func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		if strings.Contains(string(data), "runAsync") {
			if string(data) != `{"async":true,"command":"sleep 1","runAsync":true}` {
				t.Errorf("async body = %s", data)
			}
			writeJSON(w, 202, map[string]any{"cmdId": "c2", "output": nil, "stdout": nil, "stderr": nil, "exitCode": nil})
			return
		}
		writeJSON(w, 200, map[string]any{"cmdId": "c1", "output": "\x01\x01\x01hi\n", "stdout": "hi\n", "stderr": "", "exitCode": 0})
	})
	mux.HandleFunc("POST /toolbox/sb/process/session/nope/exec", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 500, map[string]any{"statusCode": 500, "message": "failed to execute command: not found: session not found", "code": "INTERNAL_SERVER_ERROR"})
	})
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/c2", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": "c2", "command": "sleep 1"})
	})
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/c1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": "c1", "command": "echo hi", "exitCode": 0})
	})
	mux.HandleFunc("GET /toolbox/sb/process/session/s1/command/{cid}/logs", func(w http.ResponseWriter, r *http.Request) {
		raw := "\x01\x01\x01out\n\x02\x02\x02err\n"
		if r.PathValue("cid") == "old" {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(raw))
			return
		}
		writeJSON(w, 200, map[string]any{"output": raw, "stdout": "out\n", "stderr": "err\n"})
	})
	mux.HandleFunc("POST /toolbox/sb/process/session/s1/command/c2/input", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"data":"yes"}`)
		w.WriteHeader(204)
	})
	mux.HandleFunc("POST /toolbox/sb/process/session/s1/command/c1/input", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 410, map[string]any{"statusCode": 410, "message": "gone: command already finished", "code": "GONE"})
	})
	mux.HandleFunc("GET /toolbox/sb/process/session/s1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"sessionId": "s1", "commands": []any{map[string]any{"id": "c1", "command": "echo hi", "exitCode": 0}}})
	})
	mux.HandleFunc("DELETE /toolbox/sb/process/session/s1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })

	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	ctx := t.Context()
	if err := tb.CreateSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	res, err := tb.SessionExec(ctx, "s1", SessionExecRequest{Command: "echo hi"})
	if err != nil || res.CmdID != "c1" || res.Stdout != "hi\n" || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	res, err = tb.SessionExec(ctx, "s1", SessionExecRequest{Command: "sleep 1", Async: true})
	if err != nil || res.CmdID != "c2" || res.ExitCode != nil {
		t.Fatal(res, err)
	}
	if _, err := tb.SessionExec(ctx, "nope", SessionExecRequest{Command: "x"}); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "session not found") {
		t.Errorf("err = %v", err)
	}
	cmd, err := tb.GetSessionCommand(ctx, "s1", "c2")
	if err != nil || cmd.ExitCode != nil {
		t.Fatal(cmd, err)
	}
	cmd, err = tb.GetSessionCommand(ctx, "s1", "c1")
	if err != nil || cmd.ExitCode == nil || *cmd.ExitCode != 0 {
		t.Fatal(cmd, err)
	}
	for _, cid := range []string{"c1", "old"} {
		logs, err := tb.SessionCommandLogs(ctx, "s1", cid)
		if err != nil || logs.Stdout != "out\n" || logs.Stderr != "err\n" || !strings.Contains(logs.Output, "\x01\x01\x01") {
			t.Errorf("%s: logs = %+v, %v", cid, logs, err)
		}
	}
	if err := tb.SendSessionInput(ctx, "s1", "c2", "yes"); err != nil {
		t.Error(err)
	}
	if err := tb.SendSessionInput(ctx, "s1", "c1", "yes"); !errors.Is(err, ErrGone) {
		t.Errorf("err = %v", err)
	}
	s, err := tb.GetSession(ctx, "s1")
	if err != nil || len(s.Commands) != 1 {
		t.Fatal(s, err)
	}
	if err := tb.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
}

func TestFileOps(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/files/folder", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/w/a b" || r.URL.Query().Get("mode") != "755" {
			t.Errorf("query = %s", r.URL.RawQuery)
		}
		w.WriteHeader(201)
	})
	mux.HandleFunc("DELETE /toolbox/sb/files", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("recursive") != "true" {
			t.Errorf("query = %s", r.URL.RawQuery)
		}
		w.WriteHeader(204)
	})
	mux.HandleFunc("GET /toolbox/sb/files/info", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") == "/missing" {
			w.WriteHeader(404) // fs handlers send no body
			return
		}
		writeJSON(w, 200, map[string]any{"name": "f", "size": 3, "isDir": false, "permissions": "0644", "owner": "1000", "group": "1000", "mode": "-rw-r--r--"})
	})
	mux.HandleFunc("POST /toolbox/sb/files/permissions", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("mode") != "644" || r.URL.Query().Get("owner") != "daytona" || r.URL.Query().Has("group") {
			t.Errorf("query = %s", r.URL.RawQuery)
		}
	})
	mux.HandleFunc("POST /toolbox/sb/files/move", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("destination") == "/exists" {
			w.WriteHeader(409)
		}
	})
	mux.HandleFunc("GET /toolbox/sb/files/download", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") == "/missing" {
			w.WriteHeader(404)
			return
		}
		_, _ = w.Write([]byte("content"))
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	ctx := t.Context()
	if err := tb.CreateFolder(ctx, "/w/a b", "755"); err != nil {
		t.Error(err)
	}
	if err := tb.CreateFolder(ctx, "/w", "9z"); err == nil {
		t.Error("bad mode accepted")
	}
	if err := tb.DeleteFile(ctx, "/w", true); err != nil {
		t.Error(err)
	}
	if fi, err := tb.FileInfo(ctx, "/w/f"); err != nil || fi.Size != 3 || fi.Permissions != "0644" {
		t.Error(fi, err)
	}
	_, err := tb.FileInfo(ctx, "/missing")
	var ae *APIError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || ae.Message != "" {
		t.Errorf("err = %v", err)
	}
	if err := tb.SetFilePermissions(ctx, "/w/f", Permissions{Mode: "644", Owner: "daytona"}); err != nil {
		t.Error(err)
	}
	if err := tb.MoveFile(ctx, "/a", "/exists"); !errors.Is(err, ErrConflict) {
		t.Errorf("err = %v", err)
	}
	var buf bytes.Buffer
	if n, err := tb.DownloadFile(ctx, "/w/f", &buf); err != nil || n != 7 || buf.String() != "content" {
		t.Error(n, err)
	}
	if _, err := tb.DownloadFile(ctx, "/missing", &buf); !errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v", err)
	}
}

// patternReader generates n deterministic bytes without holding them.
type patternReader struct {
	n, off int64
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := min(int64(len(b)), p.n-p.off)
	for i := range k {
		x := p.off + i
		b[i] = byte(x*7 + x>>8)
	}
	p.off += k
	return int(k), nil
}

func patternHash(n int64) []byte {
	h := sha256.New()
	_, _ = io.Copy(h, &patternReader{n: n})
	return h.Sum(nil)
}

func TestUploadFilesStreamsMultipart(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	sizes := []int64{0, 1, 5 << 20}
	mux.HandleFunc("POST /toolbox/sb/files/bulk-upload", func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != -1 {
			t.Errorf("ContentLength = %d; the body should be streamed (chunked)", r.ContentLength)
		}
		mr, err := r.MultipartReader()
		if err != nil {
			t.Fatal(err)
		}
		var results []map[string]any
		var pending string
		for i := 0; ; i++ {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := part.FormName()
			if i%2 == 0 {
				want := fmt.Sprintf("files[%d].path", i/2)
				if name != want {
					t.Errorf("part %d = %s, want %s (path must precede file)", i, name, want)
				}
				b, _ := io.ReadAll(part)
				pending = string(b)
				continue
			}
			if name != fmt.Sprintf("files[%d].file", i/2) {
				t.Errorf("part %d = %s", i, name)
			}
			_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			if dp["filename"] != pending {
				t.Errorf("filename = %q, want %q", dp["filename"], pending)
			}
			h := sha256.New()
			n, _ := io.Copy(h, part)
			if !bytes.Equal(h.Sum(nil), patternHash(sizes[i/2])) {
				t.Errorf("file %d content differs", i/2)
			}
			results = append(results, map[string]any{"path": pending, "bytes": n})
		}
		writeJSON(w, 200, map[string]any{"files": results})
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	var ups []Upload
	for i, n := range sizes {
		ups = append(ups, Upload{Path: fmt.Sprintf("/w/dir %d/f", i), Reader: &patternReader{n: n}})
	}
	res, err := tb.UploadFiles(t.Context(), ups)
	if err != nil || len(res) != 3 || res[2].Bytes != 5<<20 {
		t.Fatal(res, err)
	}
}

type failingReader struct{ after int }

func (f *failingReader) Read(b []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk on fire")
	}
	n := min(len(b), f.after)
	f.after -= n
	return n, nil
}

func TestUploadSourceFailure(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/files/upload", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/w/f" {
			t.Errorf("path = %q", r.URL.Query().Get("path"))
		}
		_, _ = io.Copy(io.Discard, r.Body)
	})
	mux.HandleFunc("POST /toolbox/sb/files/bulk-upload", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 400, map[string]any{"errors": []any{map[string]any{"path": "/w/f", "error": "permission denied"}}, "files": []any{}})
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	err := tb.UploadFile(t.Context(), "/w/f", &failingReader{after: 100 << 10})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "/w/f") {
		t.Fatalf("err = %v", err)
	}
	if err := tb.UploadFile(t.Context(), "/w/f", strings.NewReader("ok")); err != nil {
		t.Fatal(err)
	}
	// The server rejects without reading everything: the producer must
	// still be released (goleak checks) and the 400 reported.
	_, err = tb.UploadFiles(t.Context(), []Upload{{Path: "/w/f", Reader: &patternReader{n: 8 << 20}}})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("err = %v", err)
	}
}

func TestDownloadFilesMultipart(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	const big = 3 << 20
	mux.HandleFunc("POST /toolbox/sb/files/bulk-download", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"paths":["/w/big","/w/missing","/w/small","/w/absent"]}`)
		mw := multipart.NewWriter(w)
		_ = mw.SetBoundary("DAYTONA-FILE-BOUNDARY")
		w.Header().Set("Content-Type", mw.FormDataContentType())
		part, _ := mw.CreatePart(filePartHeader("file", "/w/big"))
		_, _ = io.Copy(part, &patternReader{n: big})
		part, _ = mw.CreatePart(map[string][]string{
			"Content-Disposition": {`form-data; name="error"; filename="/w/missing"`},
			"Content-Type":        {"application/json"},
		})
		_, _ = part.Write([]byte(`{"statusCode":404,"message":"file not found","code":"FILE_NOT_FOUND","path":"/w/missing"}`))
		part, _ = mw.CreatePart(filePartHeader("file", "/w/small"))
		_, _ = part.Write([]byte("tiny"))
		_ = mw.Close()
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	h := sha256.New()
	var small, small2 bytes.Buffer
	res, err := tb.DownloadFiles(t.Context(), []Download{
		{Path: "/w/big", Writer: h},
		{Path: "/w/missing", Writer: io.Discard},
		{Path: "/w/small", Writer: &small},
		{Path: "/w/absent", Writer: io.Discard},
		{Path: "/w/small", Writer: &small2}, // the same path twice is fetched once
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Bytes != big || !bytes.Equal(h.Sum(nil), patternHash(big)) {
		t.Errorf("big: %+v", res[0])
	}
	if !errors.Is(res[1].Err, ErrNotFound) || !strings.Contains(res[1].Err.Error(), "file not found") {
		t.Errorf("missing: %+v", res[1])
	}
	if res[2].Err != nil || small.String() != "tiny" || small2.String() != "tiny" || res[4].Bytes != 4 {
		t.Errorf("small: %+v %q %q", res[2], small.String(), small2.String())
	}
	if res[3].Err == nil {
		t.Errorf("absent: %+v", res[3])
	}
}

func TestDownloadFilesWriterFailure(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /toolbox/sb/files/bulk-download", func(w http.ResponseWriter, r *http.Request) {
		mw := multipart.NewWriter(w)
		w.Header().Set("Content-Type", mw.FormDataContentType())
		part, _ := mw.CreatePart(filePartHeader("file", "/w/f"))
		_, _ = io.Copy(part, &patternReader{n: 1 << 20})
		_ = mw.Close()
	})
	tb := c.ToolboxFor("sb", srv.URL+"/toolbox")
	boom := errors.New("local disk full")
	_, err := tb.DownloadFiles(t.Context(), []Download{{Path: "/w/f", Writer: failWriter{boom}}})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}
