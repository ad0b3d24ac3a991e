package bundle

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// Path is where Server is mounted on the metrics port.
const Path = "/results.tar.gz"

// Header names the response header that says whether the run had
// finished when the bundle was made: "done" or "running".
const Header = "Fleetbench-Run-State"

// Server serves a directory as a gzipped tar. Until Finish is called it
// answers 503 (the run still writes it) unless the request asks for
// ?partial=1.
type Server struct {
	dir string

	mu       sync.Mutex
	finished bool
	outcome  string
}

// NewServer serves dir.
func NewServer(dir string) *Server { return &Server{dir: dir} }

// Finish marks the run done; outcome (e.g. "ok" or the error) is sent in
// the Fleetbench-Run-Outcome header.
func (s *Server) Finish(outcome string) {
	s.mu.Lock()
	s.finished, s.outcome = true, outcome
	s.mu.Unlock()
}

func (s *Server) state() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished, s.outcome
}

// ServeHTTP writes the tar.gz. An error after the first byte can only be
// reported by cutting the stream short: the gzip trailer is then missing
// and the reader fails, so a partial bundle is never taken for whole.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	done, outcome := s.state()
	if !done && r.URL.Query().Get("partial") != "1" {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "the run is still writing "+s.dir+"; retry when it ends, or ask for ?partial=1", http.StatusServiceUnavailable)
		return
	}
	if _, err := os.Stat(s.dir); err != nil {
		http.Error(w, "no output yet: "+err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="`+path.Base(filepath.ToSlash(s.dir))+`.tar.gz"`)
	if done {
		w.Header().Set(Header, "done")
		w.Header().Set("Fleetbench-Run-Outcome", outcome)
	} else {
		w.Header().Set(Header, "running")
	}
	if r.Method == http.MethodHead {
		return
	}
	if err := Write(w, s.dir); err != nil {
		// The status is sent; abort the connection so the client sees a
		// truncated stream rather than a clean end.
		panic(http.ErrAbortHandler)
	}
}

// Write writes dir's regular files and directories as a gzipped tar,
// paths relative to dir. Symlinks and special files are skipped.
func Write(w io.Writer, dir string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if info.IsDir() {
			hdr.Name += "/"
			return tw.WriteHeader(hdr)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// A file still growing is cut at the size in its header.
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = io.CopyN(tw, f, hdr.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("write bundle of %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write bundle of %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write bundle of %s: %w", dir, err)
	}
	return nil
}

// Extract unpacks a gzipped tar from r into dir (created if missing) and
// returns the number of files written. Entries that would land outside
// dir, links and special files are refused: the bundle comes over the
// network.
func Extract(r io.Reader, dir string) (int, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, fmt.Errorf("read bundle: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	tr := tar.NewReader(zr)
	files := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return files, fmt.Errorf("read bundle: %w", err)
		}
		name := path.Clean(hdr.Name)
		if name == "." || strings.HasPrefix(name, "../") || name == ".." || path.IsAbs(name) {
			return files, fmt.Errorf("read bundle: entry %q leaves the output directory", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return files, fmt.Errorf("create %s: %w", name, err)
			}
		case tar.TypeReg:
			if d := path.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return files, fmt.Errorf("create %s: %w", d, err)
				}
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return files, fmt.Errorf("create %s: %w", name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return files, fmt.Errorf("write %s: %w", name, err)
			}
			files++
		default:
			return files, fmt.Errorf("read bundle: entry %q is not a file or directory", hdr.Name)
		}
	}
	// Drain to the gzip trailer: a stream cut short fails here.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return files, fmt.Errorf("read bundle: %w", err)
	}
	if err := zr.Close(); err != nil {
		return files, fmt.Errorf("read bundle: %w", err)
	}
	return files, nil
}
