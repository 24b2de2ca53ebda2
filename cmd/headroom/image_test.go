package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestImageStampsVersion: the Dockerfile cannot build an image without a
// version, stamps it into the binary through main.version (which exists
// and is what --version prints first) and into the image's labels. The
// image itself is not built here (no container engine).
func TestImageStampsVersion(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, c := range []struct{ what, re string }{
		{"VERSION is an argument with no default (an image is never 'dev')", `(?m)^ARG VERSION\s*$`},
		{"the build stops when VERSION is empty", `test -n "\$\{VERSION\}" \|\|`},
		{"-X main.version=${VERSION} in the build's ldflags", `-ldflags "[^"]*-X main\.version=\$\{VERSION\}`},
		{"the built binary's --version runs in the build", `/out/headroom --version`},
		{"the image label carries the version", `org\.opencontainers\.image\.version="\$\{VERSION\}"`},
	} {
		if !regexp.MustCompile(c.re).MatchString(df) {
			t.Errorf("Dockerfile: want %s (/%s/)", c.what, c.re)
		}
	}
	if strings.Contains(df, "ARG VERSION=dev") {
		t.Error("Dockerfile: VERSION defaults to dev")
	}

	// -X sets a package-level string variable named version in package main.
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				found = found || n.Name == "version"
			}
		}
	}
	if !found {
		t.Fatal("main.go declares no package variable version for -X main.version to set")
	}
	if got := versionString("v0.1.0", nil, false); got != "v0.1.0" {
		t.Errorf("a stamped version prints as %q", got)
	}
}
