package recipe

import (
	"path/filepath"
	"testing"
)

// TestExampleRecipes: the shipped example recipes load, recipe 1 changes one
// thing from recipe 0 (the engine), and the draft that changes three is
// caught by the one-change lint.
func TestExampleRecipes(t *testing.T) {
	dir := "../../examples/recipes"
	load := func(name string) Recipe {
		r, err := Load(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r0, r1, draft := load("0-vllm.yaml"), load("1-sglang.yaml"), load("2-128k-and-copies.yaml")
	if w := Lint(r1, r0); len(w) != 0 {
		t.Errorf("recipe 1 changes one thing from recipe 0, lint says %v", w)
	}
	if w := Lint(draft, r0); len(w) == 0 {
		t.Error("the draft changes three things and lint let it through")
	}
	if p, ok := r1.ParentFile(); !ok || filepath.Base(p) != "0-vllm.yaml" {
		t.Errorf("recipe 1's parent file = %q, %v", p, ok)
	}
}
