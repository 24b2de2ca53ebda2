package upload

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Run is one run directory under a root folder of runs
// (<root>/<recipe>/<run>/).
type Run struct {
	// Name is "recipe/run", the directory relative to the root.
	Name string `json:"name"`
	// Finished says whether summary.json is there: a run still going, or
	// one killed before it wrote its summary, has none.
	Finished bool      `json:"finished"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	Modified time.Time `json:"modified"`
}

// RunName is the name of the run directory dir: its last two folders,
// "recipe/run".
func RunName(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
}

// ListRuns lists the run directories under root (those holding the
// config.yaml every run writes first), newest first.
func ListRuns(root string) ([]Run, error) {
	recipes, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w (give the folder run directories are written to, the run file's output)", err)
	}
	var runs []Run
	for _, rd := range recipes {
		if !rd.IsDir() || strings.HasPrefix(rd.Name(), ".") {
			continue
		}
		dirs, err := os.ReadDir(filepath.Join(root, rd.Name()))
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			p := filepath.Join(root, rd.Name(), d.Name())
			if !d.IsDir() || !exists(filepath.Join(p, "config.yaml")) {
				continue
			}
			r := Run{Name: rd.Name() + "/" + d.Name(), Finished: exists(filepath.Join(p, "summary.json"))}
			files, err := runFiles(p)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				if st, err := os.Stat(filepath.Join(p, filepath.FromSlash(f))); err == nil {
					r.Files++
					r.Bytes += st.Size()
					if st.ModTime().After(r.Modified) {
						r.Modified = st.ModTime().UTC()
					}
				}
			}
			runs = append(runs, r)
		}
	}
	sort.SliceStable(runs, func(i, j int) bool {
		if !runs[i].Modified.Equal(runs[j].Modified) {
			return runs[i].Modified.After(runs[j].Modified)
		}
		return runs[i].Name < runs[j].Name
	})
	return runs, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// resolve checks that name is a run directory under root and gives its path.
func resolve(root, name string) (string, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 2 || !filepath.IsLocal(filepath.FromSlash(name)) || parts[0] == "" || parts[1] == "" || strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[1], ".") {
		return "", fmt.Errorf("%q is not a run name: give recipe/run as `headroom runs list` shows it", name)
	}
	p := filepath.Join(root, filepath.FromSlash(name))
	if !exists(filepath.Join(p, "config.yaml")) {
		return "", fmt.Errorf("no run directory %s under %s (see `headroom runs list`)", name, root)
	}
	return p, nil
}

// Pack writes the named run directories under root ("recipe/run"; none
// means all) to w as one tar.gz whose entries are named recipe/run/file.
func Pack(w io.Writer, root string, names []string) error {
	if len(names) == 0 {
		runs, err := ListRuns(root)
		if err != nil {
			return err
		}
		for _, r := range runs {
			names = append(names, r.Name)
		}
		sort.Strings(names)
	}
	dirs := make([]string, len(names))
	for i, n := range names {
		p, err := resolve(root, n)
		if err != nil {
			return err
		}
		dirs[i] = p
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	seen := map[string]bool{}
	for i, n := range names {
		if err := packDir(tw, dirs[i], n, seen); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func packDir(tw *tar.Writer, dir, name string, seen map[string]bool) error {
	files, err := runFiles(dir)
	if err != nil {
		return err
	}
	addDir := func(d string) error {
		if seen[d] {
			return nil
		}
		seen[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Now().UTC().Truncate(time.Second)})
	}
	if err := addDir(path.Dir(name)); err != nil {
		return err
	}
	if err := addDir(name); err != nil {
		return err
	}
	for _, f := range files {
		if d := path.Dir(f); d != "." {
			if err := addDir(path.Join(name, d)); err != nil {
				return err
			}
		}
		if err := packFile(tw, filepath.Join(dir, filepath.FromSlash(f)), path.Join(name, f)); err != nil {
			return err
		}
	}
	return nil
}

func packFile(tw *tar.Writer, file, name string) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: st.Size(), ModTime: st.ModTime().UTC()}); err != nil {
		return err
	}
	// a file still growing (a run in progress) is cut at the size the
	// header gave, so the archive stays whole
	if _, err := io.CopyN(tw, fh, st.Size()); err != nil {
		return fmt.Errorf("pack %s: %w", file, err)
	}
	return nil
}

// Unpack reads a tar.gz that Pack wrote and writes its files under dest,
// each atomically; it returns the run names ("recipe/run") it held. Entries
// that would land outside dest, links and devices are refused.
func Unpack(r io.Reader, dest string) ([]string, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("unpack: not a gzip stream: %w", err)
	}
	tr := tar.NewReader(gz)
	seen := map[string]bool{}
	var runs []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return runs, fmt.Errorf("unpack: %w (the stream was cut short?)", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return runs, fmt.Errorf("unpack: refusing %q: it would land outside %s", h.Name, dest)
		}
		p := filepath.Join(dest, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return runs, err
			}
			continue
		case tar.TypeReg:
		default:
			return runs, fmt.Errorf("unpack: refusing %q: only files and folders are unpacked", h.Name)
		}
		if parts := strings.SplitN(name, "/", 3); len(parts) == 3 && !seen[parts[0]+"/"+parts[1]] {
			seen[parts[0]+"/"+parts[1]] = true
			runs = append(runs, parts[0]+"/"+parts[1])
		}
		if err := writeAtomic(p, tr, h.ModTime); err != nil {
			return runs, err
		}
	}
	if err := gz.Close(); err != nil {
		return runs, err
	}
	return runs, nil
}

func writeAtomic(p string, r io.Reader, mtime time.Time) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("unpack %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if !mtime.IsZero() {
		os.Chtimes(p, mtime, mtime)
	}
	return nil
}
