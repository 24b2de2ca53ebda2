package rig

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/headroom-bench/headroom/internal/report"
)

// snapshot is a run directory as it was before --resume touched it: a
// hard link to each of its files, so that a resume that fails before its
// sweep starts (pre-flight, evals) puts every file back as it was and
// removes those it made. Everything a resume writes before the sweep is
// written anew (a temporary file, then a rename), never in place, so the
// links keep the old contents.
type snapshot struct {
	d     *report.Dir
	saved map[string]string // file name -> its link
}

// backupPrefix starts the names of a snapshot's links.
const backupPrefix = ".before-resume."

func takeSnapshot(d *report.Dir) (*snapshot, error) {
	s := &snapshot{d: d, saved: map[string]string{}}
	entries, err := os.ReadDir(d.Path())
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") {
			continue
		}
		link := d.File(backupPrefix + name)
		os.Remove(link) // one a crashed resume left
		if err := os.Link(d.File(name), link); err != nil {
			s.drop()
			return nil, fmt.Errorf("--resume %s: keeping %s to put back if the resume fails: %w (is the run directory writable?)", d.Path(), name, err)
		}
		s.saved[name] = link
	}
	return s, nil
}

// restore puts the directory back as it was: every file as it was, and
// none the resume made.
func (s *snapshot) restore() error {
	var errs []error
	entries, err := os.ReadDir(s.d.Path())
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if _, kept := s.saved[name]; !kept && e.Type().IsRegular() && !strings.HasPrefix(name, ".") {
			errs = append(errs, os.Remove(s.d.File(name)))
		}
	}
	for name, link := range s.saved {
		errs = append(errs, os.Rename(link, s.d.File(name)))
		// a file the resume did not replace is the link's own inode, and
		// rename leaves both names then
		if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	s.saved = nil
	return errors.Join(errs...)
}

// drop lets the resume's changes stand: the links go.
func (s *snapshot) drop() {
	for _, link := range s.saved {
		os.Remove(link)
	}
	s.saved = nil
}
