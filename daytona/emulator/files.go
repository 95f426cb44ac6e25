package emulator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The file API mirrors the daemon's fs handlers: paths come in the query and
// resolve against the work dir; most failures are a bare status with an empty
// body (gin's AbortWithError), which clients must handle.

const bulkBoundary = "DAYTONA-FILE-BOUNDARY"

func fsStatus(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	default:
		return http.StatusBadRequest
	}
}

func fileInfoOf(path string, fi fs.FileInfo) fileInfoJSON {
	owner, group := "", ""
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner, group = strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	}
	return fileInfoJSON{
		Name:        fi.Name(),
		Size:        fi.Size(),
		Mode:        fi.Mode().String(),
		ModTime:     fi.ModTime().String(),
		ModifiedAt:  fi.ModTime().UTC().Format(time.RFC3339),
		IsDir:       fi.IsDir(),
		Owner:       owner,
		Group:       group,
		Permissions: fmt.Sprintf("%04o", fi.Mode().Perm()),
		Path:        path,
	}
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	root := resolvePath(sb, r.URL.Query().Get("path"))
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bareStatus(w, http.StatusBadRequest)
			return
		}
		depth = n
	}
	fi, err := os.Stat(root)
	if err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	if !fi.IsDir() {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	out := []fileInfoJSON{}
	var walk func(dir string, level int)
	walk = func(dir string, level int) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			info, err := e.Info()
			if err != nil {
				continue // entries that fail to stat are skipped
			}
			out = append(out, fileInfoOf(p, info))
			if info.IsDir() && level < depth {
				walk(p, level+1)
			}
		}
	}
	walk(root, 1)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleFileInfo(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := requiredPath(w, r, sb)
	if !ok {
		return
	}
	fi, err := os.Stat(p)
	if err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	writeJSON(w, http.StatusOK, fileInfoOf(p, fi))
}

func parseMode(v string, def os.FileMode) (os.FileMode, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("invalid mode %q", v)
	}
	return os.FileMode(n), nil
}

// firstMissing returns the topmost ancestor of p (or p) that does not exist,
// or "" if p exists.
func firstMissing(p string) string {
	missing := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if _, err := os.Lstat(cur); err == nil {
			return missing
		}
		missing = cur
		if cur == filepath.Dir(cur) {
			return missing
		}
	}
}

// noteExternal remembers a path created outside the sandbox folder, so the
// sandbox's deletion (or Close) removes it: sandboxes share the host's /tmp.
func (s *Server) noteExternal(sb *sandbox, created string) {
	if created == "" || created == sb.dir || strings.HasPrefix(created, sb.dir+string(filepath.Separator)) {
		return
	}
	s.mu.Lock()
	sb.external[created] = true
	s.mu.Unlock()
}

// requiredPath resolves the path query of a route that needs one, or
// answers the daemon's "path is required" (a bare 400): an empty path is not
// the sandbox's work folder there.
func requiredPath(w http.ResponseWriter, r *http.Request, sb *sandbox) (string, bool) {
	q := r.URL.Query().Get("path")
	if q == "" {
		bareStatus(w, http.StatusBadRequest)
		return "", false
	}
	return resolvePath(sb, q), true
}

func (s *Server) handleCreateFolder(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := requiredPath(w, r, sb)
	if !ok {
		return
	}
	mode, err := parseMode(r.URL.Query().Get("mode"), 0o755)
	if err != nil {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	created := firstMissing(p)
	if err := os.MkdirAll(p, mode); err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	s.noteExternal(sb, created)
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.journal(sb.id, ToolboxCall{Route: "delete", Paths: []string{r.URL.Query().Get("path")}})
	p, ok := requiredPath(w, r, sb)
	if !ok {
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	if fi.IsDir() {
		if r.URL.Query().Get("recursive") != "true" {
			bareStatus(w, http.StatusBadRequest)
			return
		}
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
	}
	if err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.journal(sb.id, ToolboxCall{Route: "download", Paths: []string{r.URL.Query().Get("path")}})
	p := resolvePath(sb, r.URL.Query().Get("path"))
	f, err := os.Open(p)
	if err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, quoteEscaper.Replace(filepath.Base(p))))
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	_, _ = io.Copy(w, f)
}

var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// handleBulkDownload streams a multipart body (boundary DAYTONA-FILE-BOUNDARY):
// a part named "file" per readable path, a JSON part named "error" per
// failure, each with filename = the path exactly as requested.
func (s *Server) handleBulkDownload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody)).Decode(&req); err != nil {
		ptyError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	s.journal(sb.id, ToolboxCall{Route: "bulk-download", Paths: req.Paths})
	if len(req.Paths) == 0 {
		ptyError(w, http.StatusBadRequest, "paths must not be empty")
		return
	}
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(bulkBoundary); err != nil {
		ptyError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "multipart/form-data; boundary="+bulkBoundary)
	w.WriteHeader(http.StatusOK)
	for _, reqPath := range req.Paths {
		if err := s.writeBulkPart(r, mw, sb, reqPath); err != nil {
			return // the client went away
		}
	}
	_ = mw.Close()
}

func (s *Server) writeBulkPart(r *http.Request, mw *multipart.Writer, sb *sandbox, reqPath string) error {
	fail := func(status int, code, msg string) error {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="error"; filename="%s"`, quoteEscaper.Replace(reqPath)))
		h.Set("Content-Type", "application/json")
		pw, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(map[string]any{
			"statusCode": status, "message": msg, "code": code, "timestamp": isoTime(s.now()),
			"path": reqPath, "method": r.Method,
		})
		_, err = pw.Write(b)
		return err
	}
	f, err := os.Open(resolvePath(sb, reqPath))
	if err != nil {
		switch fsStatus(err) {
		case http.StatusNotFound:
			return fail(http.StatusNotFound, "FILE_NOT_FOUND", "file not found: "+reqPath)
		case http.StatusForbidden:
			return fail(http.StatusForbidden, "FILE_ACCESS_DENIED", "permission denied: "+reqPath)
		default:
			return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: "+reqPath)
		}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(http.StatusInternalServerError, "FILE_READ_FAILED", "failed to read file: "+reqPath)
	}
	if fi.IsDir() {
		return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "path is a directory: "+reqPath)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, quoteEscaper.Replace(reqPath)))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	pw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(pw, f)
	return err
}

// writeUpload streams src into dest, creating parent folders.
func (s *Server) writeUpload(sb *sandbox, dest string, src io.Reader) (int64, error) {
	created := firstMissing(dest)
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	s.noteExternal(sb, created)
	n, err := io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.journal(sb.id, ToolboxCall{Route: "upload", Paths: []string{r.URL.Query().Get("path")}})
	dest := resolvePath(sb, r.URL.Query().Get("path"))
	mr, err := r.MultipartReader()
	if err != nil || r.URL.Query().Get("path") == "" {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			bareStatus(w, http.StatusBadRequest) // no "file" part
			return
		}
		if part.FormName() != "file" {
			_, _ = io.Copy(io.Discard, part)
			continue
		}
		if _, err := s.writeUpload(sb, dest, part); err != nil {
			bareStatus(w, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
}

var bulkFieldRE = regexp.MustCompile(`^files\[(\d+)\]\.(path|file)$`)

// handleBulkUpload streams a multipart body where files[i].path precedes
// files[i].file; each file goes straight to disk, never into memory.
func (s *Server) handleBulkUpload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	type uploaded struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	type uploadErr struct {
		Path  string `json:"path,omitempty"`
		Index int    `json:"index"`
		Error string `json:"error"`
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []uploadErr{{Error: "expected a multipart body"}}, "files": []uploaded{}})
		return
	}
	paths := map[int]string{}
	files := []uploaded{}
	var errs []uploadErr
	var order []string
	defer func() { s.journal(sb.id, ToolboxCall{Route: "bulk-upload", Paths: order}) }()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, uploadErr{Index: -1, Error: "malformed multipart body: " + err.Error()})
			break
		}
		m := bulkFieldRE.FindStringSubmatch(part.FormName())
		if m == nil {
			_, _ = io.Copy(io.Discard, part)
			continue
		}
		i, _ := strconv.Atoi(m[1])
		if m[2] == "path" {
			v, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				errs = append(errs, uploadErr{Index: i, Error: err.Error()})
				continue
			}
			paths[i] = string(v)
			order = append(order, string(v))
			continue
		}
		p, ok := paths[i]
		if !ok || p == "" {
			_, _ = io.Copy(io.Discard, part)
			errs = append(errs, uploadErr{Index: i, Error: fmt.Sprintf("files[%d].path must precede files[%d].file", i, i)})
			continue
		}
		n, err := s.writeUpload(sb, resolvePath(sb, p), part)
		if err != nil {
			_, _ = io.Copy(io.Discard, part)
			errs = append(errs, uploadErr{Path: p, Index: i, Error: err.Error()})
			continue
		}
		files = append(files, uploaded{Path: p, Bytes: n})
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files})
}

func (s *Server) handleMove(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	src := resolvePath(sb, r.URL.Query().Get("source"))
	dst := resolvePath(sb, r.URL.Query().Get("destination"))
	if _, err := os.Lstat(src); err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	if _, err := os.Lstat(dst); err == nil {
		bareStatus(w, http.StatusConflict)
		return
	}
	if _, err := os.Stat(filepath.Dir(dst)); err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	if err := os.Rename(src, dst); err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func lookupID(v string, byName func(string) (string, error)) (int, error) {
	if v == "" {
		return -1, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n, nil
	}
	s, err := byName(v)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

func (s *Server) handlePermissions(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	q := r.URL.Query()
	s.journal(sb.id, ToolboxCall{Route: "permissions", Paths: []string{q.Get("path")}, Mode: q.Get("mode")})
	p := resolvePath(sb, q.Get("path"))
	fi, err := os.Stat(p)
	if err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	mode, err := parseMode(q.Get("mode"), fi.Mode().Perm())
	if err != nil {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	uid, err := lookupID(q.Get("owner"), func(n string) (string, error) {
		u, err := user.Lookup(n)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	})
	if err != nil {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	gid, err := lookupID(q.Get("group"), func(n string) (string, error) {
		g, err := user.LookupGroup(n)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	})
	if err != nil {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	if q.Get("mode") != "" {
		if err := os.Chmod(p, mode); err != nil {
			bareStatus(w, fsStatus(err))
			return
		}
	}
	if uid != -1 || gid != -1 {
		if err := os.Chown(p, uid, gid); err != nil {
			bareStatus(w, fsStatus(err))
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// handleFind greps for a literal substring, skipping binary files.
func (s *Server) handleFind(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	root := resolvePath(sb, r.URL.Query().Get("path"))
	pattern := r.URL.Query().Get("pattern")
	if _, err := os.Stat(root); err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	type match struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Content string `json:"content"`
	}
	out := []match{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		if bytes.IndexByte(head[:n], 0) >= 0 {
			return nil
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for line := 1; sc.Scan(); line++ {
			if strings.Contains(sc.Text(), pattern) {
				out = append(out, match{File: p, Line: line, Content: sc.Text()})
			}
		}
		return nil
	})
	writeJSON(w, http.StatusOK, out)
}

// handleSearch matches base names against a glob, recursively.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	root := resolvePath(sb, r.URL.Query().Get("path"))
	pattern := r.URL.Query().Get("pattern")
	if _, err := filepath.Match(pattern, ""); err != nil {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	if _, err := os.Stat(root); err != nil {
		bareStatus(w, fsStatus(err))
		return
	}
	out := []string{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		if ok, _ := filepath.Match(pattern, d.Name()); ok {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	writeJSON(w, http.StatusOK, map[string]any{"files": out})
}

func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Files    []string `json:"files"`
		Pattern  string   `json:"pattern"`
		NewValue *string  `json:"newValue"`
	}
	if !s.decodeToolboxJSON(w, r, &req) {
		return
	}
	if req.Pattern == "" || req.NewValue == nil {
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: pattern and newValue are required")
		return
	}
	type result struct {
		File    string `json:"file"`
		Success bool   `json:"success"`
		Error   string `json:"error,omitempty"`
	}
	out := []result{}
	for _, f := range req.Files {
		p := resolvePath(sb, f)
		b, err := os.ReadFile(p)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(p); err == nil {
				err = os.WriteFile(p, []byte(strings.ReplaceAll(string(b), req.Pattern, *req.NewValue)), fi.Mode().Perm())
			}
		}
		if err != nil {
			out = append(out, result{File: f, Error: err.Error()})
			continue
		}
		out = append(out, result{File: f, Success: true})
	}
	writeJSON(w, http.StatusOK, out)
}

// copyTree copies src into dst (created), keeping modes and symlinks.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		default:
			return nil // sockets, FIFOs, devices are not part of a snapshot
		}
	})
}
