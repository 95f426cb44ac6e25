package emulator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

func q(path string, kv ...string) string {
	v := url.Values{"path": {path}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func TestFiles(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	home := env.Server.Sandboxes()[0].HomeDir

	r := c.tb(id, "POST", "/files/folder?"+q(home+"/proj/src", "mode", "0750"), nil)
	require.Equal(t, http.StatusCreated, r.status)
	assert.Empty(t, r.body)
	fi, err := os.Stat(filepath.Join(home, "proj/src"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, 400, c.tb(id, "POST", "/files/folder?"+q("x", "mode", "99z"), nil).status)

	require.NoError(t, os.WriteFile(filepath.Join(home, "proj/src/a.txt"), []byte("alpha\nneedle here\n"), 0o640))
	info := c.tb(id, "GET", "/files/info?"+q("proj/src/a.txt"), nil)
	require.Equal(t, 200, info.status)
	got := info.obj(t)
	assert.Equal(t, "a.txt", got["name"])
	assert.EqualValues(t, 18, got["size"])
	assert.Equal(t, "-rw-r-----", got["mode"])
	assert.Equal(t, "0640", got["permissions"])
	assert.Equal(t, false, got["isDir"])
	assert.Regexp(t, `^\d+$`, got["owner"])
	assert.Contains(t, got, "modifiedAt")

	for _, tt := range []struct {
		name, method, path string
		status             int
	}{
		{"info missing", "GET", "/files/info?" + q("nope"), 404},
		{"list missing", "GET", "/files?" + q("nope"), 404},
		{"list a file", "GET", "/files?" + q("proj/src/a.txt"), 400},
		{"delete missing", "DELETE", "/files?" + q("nope"), 404},
		{"delete dir without recursive", "DELETE", "/files?" + q("proj"), 400},
		{"download missing", "GET", "/files/download?" + q("nope"), 404},
		{"download a dir", "GET", "/files/download?" + q("proj"), 400},
		{"move missing source", "POST", "/files/move?source=nope&destination=x", 404},
		{"move onto existing", "POST", "/files/move?source=proj/src/a.txt&destination=proj/src", 409},
		{"permissions missing", "POST", "/files/permissions?" + q("nope", "mode", "0600"), 404},
		{"permissions unknown owner", "POST", "/files/permissions?" + q("proj", "owner", "no-such-user-xyz"), 400},
	} {
		r := c.tb(id, tt.method, tt.path, nil)
		assert.Equal(t, tt.status, r.status, tt.name)
		assert.Empty(t, r.body, "%s: fs errors have an empty body", tt.name)
	}

	var list []map[string]any
	c.tb(id, "GET", "/files?"+q("proj"), nil).json(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "src", list[0]["name"])
	c.tb(id, "GET", "/files?"+q("proj", "depth", "2"), nil).json(t, &list)
	assert.Len(t, list, 2)

	dl := c.tb(id, "GET", "/files/download?"+q("proj/src/a.txt"), nil)
	require.Equal(t, 200, dl.status)
	assert.Equal(t, "alpha\nneedle here\n", string(dl.body))
	assert.Equal(t, `attachment; filename="a.txt"`, dl.header.Get("Content-Disposition"))

	var found []map[string]any
	c.tb(id, "GET", "/files/find?"+q("proj", "pattern", "needle"), nil).json(t, &found)
	require.Len(t, found, 1)
	assert.EqualValues(t, 2, found[0]["line"])
	var search struct{ Files []string }
	c.tb(id, "GET", "/files/search?"+q("proj", "pattern", "*.txt"), nil).json(t, &search)
	assert.Equal(t, []string{filepath.Join(home, "proj/src/a.txt")}, search.Files)

	require.Equal(t, 200, c.tb(id, "POST", "/files/permissions?"+q("proj/src/a.txt", "mode", "0600"), nil).status)
	fi, _ = os.Stat(filepath.Join(home, "proj/src/a.txt"))
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.Equal(t, 200, c.tb(id, "POST", "/files/move?source=proj/src/a.txt&destination=proj/b.txt", nil).status)
	var rep []map[string]any
	c.tb(id, "POST", "/files/replace", map[string]any{"files": []string{"proj/b.txt", "nope"}, "pattern": "needle", "newValue": "pin"}).json(t, &rep)
	assert.Equal(t, true, rep[0]["success"])
	assert.Equal(t, false, rep[1]["success"])
	b, _ := os.ReadFile(filepath.Join(home, "proj/b.txt"))
	assert.Equal(t, "alpha\npin here\n", string(b))

	r = c.tb(id, "DELETE", "/files?"+q("proj", "recursive", "true"), nil)
	assert.Equal(t, http.StatusNoContent, r.status)
	_, err = os.Stat(filepath.Join(home, "proj"))
	assert.True(t, os.IsNotExist(err))

	// Single upload (multipart field "file").
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "x.bin")
	fw.Write([]byte("single"))
	mw.Close()
	req, _ := http.NewRequest("POST", env.ToolboxURL(id)+"/files/upload?"+q("up/x.bin"), &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	res, err := c.http.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 200, res.StatusCode)
	b, _ = os.ReadFile(filepath.Join(home, "up/x.bin"))
	assert.Equal(t, "single", string(b))
}

// pattern is a deterministic, never-materialised byte stream.
type pattern struct{ off, size int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := int64(len(b))
	if rest := p.size - p.off; n > rest {
		n = rest
	}
	for i := int64(0); i < n; i++ {
		b[i] = byte((p.off + i) * 7 % 251)
	}
	p.off += n
	return int(n), nil
}

// TestBulkTransferLargeFile streams a large file up and down through the
// multipart endpoints and checks the emulator's allocations stay far below
// the file size (nothing is buffered whole).
func TestBulkTransferLargeFile(t *testing.T) {
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	home := env.Server.Sandboxes()[0].HomeDir
	const size = 64 << 20

	want := sha256.New()
	io.Copy(want, &pattern{size: size})
	wantSum := want.Sum(nil)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("files[0].path", home+"/big/blob.bin")
		fw, err := mw.CreateFormFile("files[0].file", "blob.bin")
		if err == nil {
			_, err = io.Copy(fw, &pattern{size: size})
		}
		if err == nil {
			_ = mw.WriteField("files[1].path", "small.txt")
			fw, _ := mw.CreateFormFile("files[1].file", "small.txt")
			fw.Write([]byte("small"))
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", env.ToolboxURL(id)+"/files/bulk-upload", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	res, err := c.http.Do(req)
	require.NoError(t, err)
	var up struct {
		Files []struct {
			Path  string
			Bytes int64
		}
	}
	require.Equal(t, 200, res.StatusCode)
	require.NoError(t, json.NewDecoder(res.Body).Decode(&up))
	res.Body.Close()
	require.Len(t, up.Files, 2)
	assert.EqualValues(t, size, up.Files[0].Bytes)
	assert.Equal(t, "small.txt", up.Files[1].Path)

	body, _ := json.Marshal(map[string]any{"paths": []string{home + "/big/blob.bin", "missing.txt", "small.txt"}})
	req, _ = http.NewRequestWithContext(ctx, "POST", env.ToolboxURL(id)+"/files/bulk-download", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err = c.http.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	mt, params, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, "multipart/form-data", mt)
	assert.Equal(t, "DAYTONA-FILE-BOUNDARY", params["boundary"])
	rd := multipart.NewReader(res.Body, params["boundary"])
	var parts []string
	for {
		part, err := rd.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		// Part.FileName keeps only the base name; clients (busboy with
		// preservePath) read the full path, so check the raw header.
		_, dp, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		require.NoError(t, err)
		parts = append(parts, part.FormName()+":"+dp["filename"])
		switch dp["filename"] {
		case home + "/big/blob.bin":
			assert.Equal(t, "file", part.FormName())
			assert.Equal(t, fmt.Sprint(size), part.Header.Get("Content-Length"))
			h := sha256.New()
			n, err := io.Copy(h, part)
			require.NoError(t, err)
			assert.EqualValues(t, size, n)
			assert.Equal(t, wantSum, h.Sum(nil), "downloaded bytes equal uploaded bytes")
		case "missing.txt":
			assert.Equal(t, "error", part.FormName())
			var e map[string]any
			require.NoError(t, json.NewDecoder(part).Decode(&e))
			assert.Equal(t, "FILE_NOT_FOUND", e["code"])
			assert.EqualValues(t, 404, e["statusCode"])
		case "small.txt":
			b, _ := io.ReadAll(part)
			assert.Equal(t, "small", string(b))
		}
	}
	assert.Equal(t, []string{"file:" + home + "/big/blob.bin", "error:missing.txt", "file:small.txt"}, parts)

	runtime.ReadMemStats(&after)
	// Client and server share this process; 2×64 MiB moved, so a server that
	// buffered a whole file would allocate ≥ 64 MiB on its own.
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB while moving 2×%d MiB", allocated>>10, size>>20)
	assert.Less(t, allocated, uint64(size/2), "allocated %d MiB moving 2×%d MiB", allocated>>20, size>>20)

	// Bad requests.
	rr := c.tb(id, "POST", "/files/bulk-download", map[string]any{"paths": []string{}})
	assert.Equal(t, 400, rr.status)
	assert.Contains(t, rr.obj(t), "error")
}

// An empty path is refused as the daemon refuses it ("path is required",
// 400) by the routes that check it, rather than read as the work folder: a
// delete of "" does not remove the sandbox's work folder.
func TestFileRoutesRefuseAnEmptyPath(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	work := env.Server.Sandboxes()[0].HomeDir
	for _, call := range []struct{ method, path string }{
		{"POST", "/files/folder?path=&mode=755"},
		{"POST", "/files/folder"},
		{"GET", "/files/info?path="},
		{"DELETE", "/files?path=&recursive=true"},
	} {
		r := c.tb(id, call.method, call.path, nil)
		assert.Equal(t, http.StatusBadRequest, r.status, "%s %s", call.method, call.path)
		assert.Empty(t, r.body, "%s %s", call.method, call.path)
	}
	_, err := os.Stat(work)
	assert.NoError(t, err, "the work folder is still there")
}
