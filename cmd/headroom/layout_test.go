package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// layoutRow matches a row of docs/layout.md's package table: "| `internal/x` |".
var layoutRow = regexp.MustCompile("(?m)^\\| `((?:internal|cmd)/[a-z0-9_/]+)` \\|")

// goPackages lists the directories under root/dir (relative to root) that
// hold a non-test Go file: the packages of the tree.
func goPackages(t *testing.T, root, dir string) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".go") || strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if len(pkgs) == 0 || pkgs[len(pkgs)-1] != rel {
			pkgs = append(pkgs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// layoutDiff says which packages are missing from the layout text and which
// rows name a package that is not in pkgs.
func layoutDiff(text string, pkgs []string) (missing, stale []string) {
	listed := map[string]bool{}
	for _, m := range layoutRow.FindAllStringSubmatch(text, -1) {
		listed[m[1]] = true
	}
	have := map[string]bool{}
	for _, p := range pkgs {
		have[p] = true
		if !listed[p] {
			missing = append(missing, p)
		}
	}
	for p := range listed {
		if !have[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	return missing, stale
}

// TestLayoutListsEveryPackage checks docs/layout.md's package table against
// the tree: every package under internal/ and cmd/ has a row, and no row
// names a package that no longer exists.
func TestLayoutListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	text, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := append(goPackages(t, root, "internal"), goPackages(t, root, "cmd")...)
	if len(pkgs) < 2 {
		t.Fatalf("found %d packages under internal/ and cmd/: the walk is wrong", len(pkgs))
	}
	missing, stale := layoutDiff(string(text), pkgs)
	for _, p := range missing {
		t.Errorf("docs/layout.md has no row for package %s", p)
	}
	for _, p := range stale {
		t.Errorf("docs/layout.md has a row for %s, which is not a package in the tree", p)
	}
}

// TestLayoutDiffSeesBothWays checks the comparison itself on a made-up
// table: a package without a row and a row without a package are both told.
func TestLayoutDiffSeesBothWays(t *testing.T) {
	text := "| package | its one job |\n|---|---|\n| `internal/a` | a |\n| `internal/gone` | gone |\n"
	missing, stale := layoutDiff(text, []string{"internal/a", "internal/b"})
	if strings.Join(missing, ",") != "internal/b" || strings.Join(stale, ",") != "internal/gone" {
		t.Fatalf("missing %v stale %v, want [internal/b] [internal/gone]", missing, stale)
	}
}
