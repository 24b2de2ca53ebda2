package load

import (
	"testing"

	"github.com/headroom-bench/headroom/internal/prompt"
)

// TestTakeAhead: a turn read ahead is sent only by the send it was read for
// (the turn's first try, with its max tokens); a retry, a priming request
// or other max tokens let it go, and so does the end of its play.
func TestTakeAhead(t *testing.T) {
	discarded := 0
	mk := func(maxTokens int) aheadTurn {
		return aheadTurn{text: &prompt.Text{}, ahead: &Ahead{maxTokens: maxTokens, discard: func() { discarded++ }}}
	}
	g := &Generator{aheads: map[aheadKey]aheadTurn{{1, 3}: mk(10), {1, 4}: mk(10), {1, 5}: mk(10), {2, 3}: mk(10), {2, 4}: mk(10)}}
	if text, a := g.takeAhead(1, 3, true, 10); text == nil || a == nil || discarded != 0 {
		t.Errorf("the first try of turn 3: %v, %v (%d discarded), want its read-ahead", text, a, discarded)
	}
	if text, a := g.takeAhead(1, 3, true, 10); text != nil || a != nil {
		t.Error("turn 3's read-ahead was taken twice")
	}
	if text, a := g.takeAhead(1, 4, false, 10); text != nil || a != nil || discarded != 1 {
		t.Errorf("a retry of turn 4 took its read-ahead (%d discarded), want it let go", discarded)
	}
	if text, a := g.takeAhead(1, 5, true, 1); text != nil || a != nil || discarded != 2 {
		t.Errorf("turn 5 with other max tokens took its read-ahead (%d discarded), want it let go", discarded)
	}
	g.dropAheads(2)
	if discarded != 4 || len(g.aheads) != 0 {
		t.Errorf("the end of play 2: %d discarded, %d left; want 4 and none", discarded, len(g.aheads))
	}
	if text, a := g.takeAhead(9, 1, true, 10); text != nil || a != nil {
		t.Error("a turn never read ahead came back read")
	}
}
