package refcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// newHostDir makes a side's own scratch folder (${HOST_DIR}): both sides
// sync to and from the same-named paths without sharing any file.
func newHostDir() (string, error) {
	return os.MkdirTemp("", "refcheck-host-")
}

// removeHostDir removes a scratch folder, read-only folders included.
func removeHostDir(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// filesLine lists a folder's tree, as what a step's syncs left on disk: one
// entry per path (the folder itself is "."), sorted, with its type, its
// permission and special mode bits, and for a file its size and SHA-256,
// for a symlink its target. Times and owners are left out. A folder that
// cannot be listed gives {"files": null, "error": "<why>"}.
func filesLine(root string) []byte {
	entries, err := listFiles(root)
	var line map[string]any
	if err != nil {
		line = map[string]any{"files": nil, "error": err.Error()}
	} else {
		line = map[string]any{"files": entries}
	}
	b, _ := json.Marshal(line)
	return b
}

func listFiles(root string) ([]map[string]any, error) {
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errors.New("missing")
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, errors.New("not a folder")
	}
	var out []map[string]any
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := map[string]any{"path": filepath.ToSlash(rel), "mode": modeString(info.Mode())}
		switch m := info.Mode(); {
		case m.IsRegular():
			e["type"], e["size"] = "file", info.Size()
			sum, err := fileSHA256(p)
			if err != nil {
				return err
			}
			e["sha256"] = sum
		case m.IsDir():
			e["type"] = "dir"
		case m&fs.ModeSymlink != 0:
			e["type"] = "symlink"
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e["link"] = target
		case m&fs.ModeNamedPipe != 0:
			e["type"] = "fifo"
		case m&fs.ModeSocket != 0:
			e["type"] = "socket"
		default:
			e["type"] = "other"
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["path"].(string) < out[j]["path"].(string) })
	return out, nil
}

// modeString is the permission and special bits in octal, as chmod takes
// them ("0644", "4755").
func modeString(m fs.FileMode) string {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return fmt.Sprintf("%04o", bits)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
