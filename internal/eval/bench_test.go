package eval

import "testing"

// BenchmarkToolCheck measures checking one answer's Edit call against its
// compiled schema: the cost the under-load path adds per eval answer.
func BenchmarkToolCheck(b *testing.B) {
	c, err := builtInToolSet().Expect("Edit")
	if err != nil {
		b.Fatal(err)
	}
	a := Answer{ToolCalls: []ToolCall{{Function: FunctionCall{Name: "Edit", Arguments: validArgs["Edit"]}}}}
	for b.Loop() {
		if m := c.Check(a); m != nil {
			b.Fatal(m)
		}
	}
}

// BenchmarkReadBackCases128k measures building the read-back suite for a
// 128k-token context (36 prompts, about 1.9 M words in all).
func BenchmarkReadBackCases128k(b *testing.B) {
	s := ReadBackSuite{ContextLen: 131072}
	for b.Loop() {
		if len(s.Cases(1)) != 36 {
			b.Fatal("wrong case count")
		}
	}
}
