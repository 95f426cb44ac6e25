package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
)

// FileInfo describes a file in the sandbox. Owner and Group are numeric IDs
// as strings; Permissions is octal ("0644"); Mode is Go's FileMode string.
type FileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	ModTime     string `json:"modTime"`
	ModifiedAt  string `json:"modifiedAt,omitempty"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	Permissions string `json:"permissions"`
}

// Permissions change a file's mode and ownership; empty fields are left
// alone. Mode is octal ("755"); Owner and Group are names or numeric IDs.
type Permissions struct {
	Mode  string
	Owner string
	Group string
}

// withQuery returns the toolbox endpoint with query parameters set.
func (t *Toolbox) withQuery(ctx context.Context, q url.Values, segments ...string) (*url.URL, error) {
	u, err := t.endpoint(ctx, segments...)
	if err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()
	return u, nil
}

func (t *Toolbox) fileCall(ctx context.Context, method string, q url.Values, out any, segments ...string) error {
	u, err := t.withQuery(ctx, q, segments...)
	if err != nil {
		return err
	}
	return t.c.do(ctx, &request{method: method, url: u}, out)
}

func requirePath(op, path string) error {
	if path == "" {
		return fmt.Errorf("daytona: %s: empty path", op)
	}
	return nil
}

// CreateFolder creates path and its parents with mode (octal, e.g. "755";
// empty means 0755).
//
// An empty path is sent as it is: Daytona refuses it (400), and the host
// hears that refusal as the plugin's SDK carries it, where a realize of an
// empty remotePath reaches it.
func (t *Toolbox) CreateFolder(ctx context.Context, path, mode string) error {
	if mode == "" {
		mode = "0755"
	}
	if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
		return fmt.Errorf("daytona: create folder: mode %q is not octal", mode)
	}
	return t.fileCall(ctx, http.MethodPost, url.Values{"path": {path}, "mode": {mode}}, nil, "files", "folder")
}

// DeleteFile deletes a file, or a directory tree when recursive is set.
func (t *Toolbox) DeleteFile(ctx context.Context, path string, recursive bool) error {
	if err := requirePath("delete", path); err != nil {
		return err
	}
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return t.fileCall(ctx, http.MethodDelete, q, nil, "files")
}

// FileInfo stats a path. A missing path fails with ErrNotFound.
func (t *Toolbox) FileInfo(ctx context.Context, path string) (*FileInfo, error) {
	if err := requirePath("file info", path); err != nil {
		return nil, err
	}
	var fi FileInfo
	if err := t.fileCall(ctx, http.MethodGet, url.Values{"path": {path}}, &fi, "files", "info"); err != nil {
		return nil, err
	}
	return &fi, nil
}

// ListFiles lists a directory (the work dir when path is empty).
func (t *Toolbox) ListFiles(ctx context.Context, path string) ([]FileInfo, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	var out []FileInfo
	if err := t.fileCall(ctx, http.MethodGet, q, &out, "files"); err != nil {
		return nil, err
	}
	return out, nil
}

// SetFilePermissions changes mode and/or ownership of path.
func (t *Toolbox) SetFilePermissions(ctx context.Context, path string, p Permissions) error {
	if err := requirePath("set permissions", path); err != nil {
		return err
	}
	if p.Mode != "" {
		if _, err := strconv.ParseUint(p.Mode, 8, 32); err != nil {
			return fmt.Errorf("daytona: set permissions: mode %q is not octal", p.Mode)
		}
	}
	q := url.Values{"path": {path}}
	setIf(q, "mode", p.Mode)
	setIf(q, "owner", p.Owner)
	setIf(q, "group", p.Group)
	return t.fileCall(ctx, http.MethodPost, q, nil, "files", "permissions")
}

// MoveFile renames source to destination. An existing destination fails with
// ErrConflict.
func (t *Toolbox) MoveFile(ctx context.Context, source, destination string) error {
	if source == "" || destination == "" {
		return errors.New("daytona: move: empty source or destination")
	}
	return t.fileCall(ctx, http.MethodPost, url.Values{"source": {source}, "destination": {destination}}, nil, "files", "move")
}

// Upload is one file of UploadFiles: Reader is streamed to Path.
type Upload struct {
	Path   string
	Reader io.Reader
}

// UploadResult is the daemon's account of one uploaded file.
type UploadResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// UploadFiles streams every reader to its path (parents are created) in one
// multipart POST /files/bulk-upload, the way the official SDKs upload. Files
// are never held in memory: the body is produced while it is sent. Uploads
// are not retried (the readers are consumed).
func (t *Toolbox) UploadFiles(ctx context.Context, files []Upload) ([]UploadResult, error) {
	if len(files) == 0 {
		return nil, nil
	}
	for i, f := range files {
		if f.Path == "" || f.Reader == nil {
			return nil, fmt.Errorf("daytona: upload: file %d needs a path and a reader", i)
		}
	}
	u, err := t.endpoint(ctx, "files", "bulk-upload")
	if err != nil {
		return nil, err
	}
	var out struct {
		Files []UploadResult `json:"files"`
	}
	err = t.streamMultipart(ctx, u, func(mw *multipart.Writer) error {
		for i, f := range files {
			if err := mw.WriteField(fmt.Sprintf("files[%d].path", i), f.Path); err != nil {
				return err
			}
			part, err := mw.CreatePart(filePartHeader(fmt.Sprintf("files[%d].file", i), f.Path))
			if err != nil {
				return err
			}
			if _, err := io.Copy(part, sourceReader{f.Reader, f.Path}); err != nil {
				return err
			}
		}
		return nil
	}, &out)
	if err != nil {
		return nil, err
	}
	return out.Files, nil
}

// UploadFile streams r to path with POST /files/upload (a single multipart
// "file" field).
func (t *Toolbox) UploadFile(ctx context.Context, path string, r io.Reader) error {
	if err := requirePath("upload", path); err != nil {
		return err
	}
	if r == nil {
		return errors.New("daytona: upload: nil reader")
	}
	u, err := t.withQuery(ctx, url.Values{"path": {path}}, "files", "upload")
	if err != nil {
		return err
	}
	return t.streamMultipart(ctx, u, func(mw *multipart.Writer) error {
		part, err := mw.CreatePart(filePartHeader("file", path))
		if err != nil {
			return err
		}
		_, err = io.Copy(part, sourceReader{r, path})
		return err
	}, nil)
}

func filePartHeader(field, filename string) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": field, "filename": filename}))
	h.Set("Content-Type", "application/octet-stream")
	return h
}

// errUploadEnded tells the body producer that the request is over.
var errUploadEnded = errors.New("daytona: upload request ended")

// sourceError is a failure to read a caller's upload source.
type sourceError struct {
	path string
	err  error
}

func (e *sourceError) Error() string { return fmt.Sprintf("read %s: %v", e.path, e.err) }
func (e *sourceError) Unwrap() error { return e.err }

// sourceReader tags read failures of an upload source.
type sourceReader struct {
	r    io.Reader
	path string
}

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		return n, &sourceError{path: s.path, err: err}
	}
	return n, err
}

// streamMultipart POSTs a multipart body produced by write through a pipe,
// so that nothing but a copy buffer is held in memory. The producing
// goroutine has always finished when this returns.
func (t *Toolbox) streamMultipart(ctx context.Context, u *url.URL, write func(*multipart.Writer) error, out any) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	produced := make(chan error, 1)
	go func() {
		err := write(mw)
		if err == nil {
			err = mw.Close()
		}
		// nil ends the body with EOF; an error makes the request fail.
		pw.CloseWithError(err)
		produced <- err
	}()
	r := &request{method: http.MethodPost, url: u, stream: pr, contentType: mw.FormDataContentType()}
	err := t.c.do(ctx, r, out)
	// Unblock the producer in case the transport stopped reading early.
	pr.CloseWithError(errUploadEnded)
	perr := <-produced
	var se *sourceError
	if errors.As(perr, &se) {
		// The request failed because a source failed; say so rather than
		// blaming the network.
		return fmt.Errorf("daytona: upload: %w", se)
	}
	return err
}

// DownloadFile streams the file at path into w with GET /files/download and
// returns the number of bytes written.
func (t *Toolbox) DownloadFile(ctx context.Context, path string, w io.Writer) (int64, error) {
	if err := requirePath("download", path); err != nil {
		return 0, err
	}
	u, err := t.withQuery(ctx, url.Values{"path": {path}}, "files", "download")
	if err != nil {
		return 0, err
	}
	r := &request{method: http.MethodGet, url: u, download: true}
	resp, err := t.c.send(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, t.copyError(ctx, r, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, &TransportError{Method: r.method, URL: sanitizeURL(u), Err: io.ErrUnexpectedEOF}
	}
	return n, nil
}

// copyError tells a failing destination from a failing response body.
func (t *Toolbox) copyError(ctx context.Context, r *request, err error) error {
	if ctx.Err() != nil {
		return t.c.transportError(ctx, r, ctx.Err())
	}
	return &TransportError{Method: r.method, URL: sanitizeURL(r.url), Err: err}
}

// Download is one file of DownloadFiles: the file at Path is streamed into
// Writer.
type Download struct {
	Path   string
	Writer io.Writer
}

// ErrNoFileData is a bulk download that sent nothing for a file.
var ErrNoFileData = errors.New("daytona: no data received for the file")

// DownloadResult reports one file of DownloadFiles. Err is non-nil when the
// daemon sent an error part (an *APIError, matching ErrNotFound for a
// missing file) or sent nothing for the file.
type DownloadResult struct {
	Path  string
	Bytes int64
	Err   error
}

// DownloadFiles fetches several files in one POST /files/bulk-download and
// streams each into its writer while the multipart response is parsed, so
// no file is held in memory. Per-file failures are reported in the results;
// the error is for the request as a whole (including a failing writer or a
// response cut short).
func (t *Toolbox) DownloadFiles(ctx context.Context, files []Download) ([]DownloadResult, error) {
	if len(files) == 0 {
		return nil, nil
	}
	results := make([]DownloadResult, len(files))
	index := make(map[string][]int, len(files))
	paths := make([]string, 0, len(files))
	for i, f := range files {
		if f.Path == "" {
			return nil, fmt.Errorf("daytona: download: file %d has no path", i)
		}
		results[i].Path = f.Path
		if _, dup := index[f.Path]; !dup {
			paths = append(paths, f.Path)
		}
		index[f.Path] = append(index[f.Path], i)
	}
	u, err := t.endpoint(ctx, "files", "bulk-download")
	if err != nil {
		return nil, err
	}
	r, err := newJSONRequest(http.MethodPost, u, map[string][]string{"paths": paths})
	if err != nil {
		return nil, err
	}
	r.download = true
	resp, err := t.c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		return nil, fmt.Errorf("daytona: download: response is %q, not multipart", resp.Header.Get("Content-Type"))
	}
	seen := make(map[string]bool, len(paths))
	mr := multipart.NewReader(resp.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return results, t.copyError(ctx, r, err)
		}
		// Part.FileName would strip the directories; the raw parameter is
		// the full source path.
		_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name, source := dp["name"], dp["filename"]
		idx, known := index[source]
		if !known {
			_ = part.Close()
			return results, fmt.Errorf("daytona: download: response carries unrequested file %q", source)
		}
		seen[source] = true
		switch name {
		case "file":
			if err := t.copyPart(ctx, r, part, files, results, idx); err != nil {
				return results, err
			}
		case "error":
			body, err := io.ReadAll(io.LimitReader(part, maxErrorBody))
			if err != nil {
				return results, t.copyError(ctx, r, err)
			}
			perr := t.downloadPartError(u, body)
			for _, i := range idx {
				results[i].Err = perr
			}
		}
		_ = part.Close()
	}
	for _, p := range paths {
		if !seen[p] {
			for _, i := range index[p] {
				results[i].Err = fmt.Errorf("daytona: download %s: %w", p, ErrNoFileData)
			}
		}
	}
	return results, nil
}

// copyPart streams a file part into the writers requested for that path.
func (t *Toolbox) copyPart(ctx context.Context, r *request, part io.Reader, files []Download, results []DownloadResult, idx []int) error {
	writers := make([]io.Writer, 0, len(idx))
	for _, i := range idx {
		if w := files[i].Writer; w != nil {
			writers = append(writers, w)
		}
	}
	dst := &trackingWriter{w: io.MultiWriter(writers...)}
	n, err := io.Copy(dst, part)
	for _, i := range idx {
		results[i].Bytes = n
	}
	if err != nil {
		if dst.err != nil {
			return fmt.Errorf("daytona: download %s: write: %w", results[idx[0]].Path, dst.err)
		}
		return t.copyError(ctx, r, err)
	}
	return nil
}

// downloadPartError turns an "error" part into an *APIError.
func (t *Toolbox) downloadPartError(u *url.URL, body []byte) error {
	var eb struct {
		StatusCode int `json:"statusCode"`
	}
	_ = json.Unmarshal(body, &eb)
	status := eb.StatusCode
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return t.c.apiErrorFromBody(http.MethodPost, u, status, nil, body)
}

// trackingWriter remembers a destination failure so it can be told apart
// from a source failure after io.Copy.
type trackingWriter struct {
	w   io.Writer
	err error
}

func (tw *trackingWriter) Write(p []byte) (int, error) {
	n, err := tw.w.Write(p)
	if err != nil {
		tw.err = err
	}
	return n, err
}
