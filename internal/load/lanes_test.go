package load

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
)

func TestTierOfKeepsTheMixAtEveryCount(t *testing.T) {
	mix := []TierShare{{"heavy", 0.5}, {"light", 0.5}}
	heavy := 0
	for i := 0; i < 20; i++ {
		if tierOf(i, mix) == "heavy" {
			heavy++
		}
		// after i+1 lanes, heavy has half of them, rounded either way
		if n := i + 1; heavy != n/2 && heavy != (n+1)/2 {
			t.Fatalf("after %d lanes %d are heavy, want %d or %d", n, heavy, n/2, (n+1)/2)
		}
	}
	third := []TierShare{{"heavy", 1}, {"light", 2}}
	h := 0
	for i := 0; i < 9; i++ {
		if tierOf(i, third) == "heavy" {
			h++
		}
	}
	if h != 3 {
		t.Errorf("a 1:2 mix over 9 lanes gave %d heavy, want 3", h)
	}
}

type collector struct {
	mu   sync.Mutex
	recs []Record
}

func (c *collector) add(r Record) { c.mu.Lock(); c.recs = append(c.recs, r); c.mu.Unlock() }
func (c *collector) all() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...)
}

func sessionOf(id string, turns int) Session {
	s := Session{ID: id, Tier: "light"}
	for i := 0; i < turns; i++ {
		s.Turns = append(s.Turns, trace.Turn{Index: i, In: 100 + 10*i, Out: 5, HashIDs: []int64{1, 2}})
	}
	return s
}

func TestLanesReplayAndRecord(t *testing.T) {
	srv := sseServer(t, 5, nil)
	clock, _ := timescale.New(1)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {sessionOf("a", 3), sessionOf("b", 4)}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, Seed: 7, Sink: col.add,
	})
	g.SetTag(Tag{Step: 0, Sessions: 2, Phase: PhaseMeasure})
	g.SetSessions(2)
	deadline := time.Now().Add(5 * time.Second)
	for len(col.all()) < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	g.Stop(time.Second)
	recs := col.all()
	if len(recs) < 20 {
		t.Fatalf("only %d records in 5 s", len(recs))
	}
	lanes := map[int]bool{}
	for _, r := range recs {
		lanes[r.Lane] = true
		if r.V != RecordVersion || r.Session == "" {
			t.Fatalf("record without version or session: %+v", r)
		}
		if r.Failed() {
			t.Errorf("unexpected failure %s: %s", r.Error, r.Detail)
		}
		if r.Phase == PhasePrime && r.MaxTokens != 1 {
			t.Errorf("a priming request must be capped at 1 token, got %d", r.MaxTokens)
		}
		if r.Phase == PhaseMeasure && r.MaxTokens != 5 {
			t.Errorf("max_tokens %d, want the trace's answer length 5", r.MaxTokens)
		}
		if r.ServedPromptTokens != 120 || r.FirstToken < r.Send || r.LastToken < r.FirstToken {
			t.Errorf("record times or usage wrong: %+v", r)
		}
	}
	if len(lanes) != 2 {
		t.Errorf("records came from lanes %v, want 2 lanes", lanes)
	}
	if g.InFlight() != 0 {
		t.Errorf("%d requests in flight after Stop", g.InFlight())
	}
}

func TestFailedConversationCountsItsUnsentTurns(t *testing.T) {
	// The server refuses any prompt longer than 115 words: turn 2 of 4
	// (130 words incl. marker) fails, so turns 3 and 4 are never sent.
	srv := sseServer(t, 3, func(w http.ResponseWriter, r *http.Request) bool {
		buf := make([]byte, 1<<20)
		n, _ := r.Body.Read(buf)
		if words := strings.Count(string(buf[:n]), " ") + 1; words > 115+10 {
			http.Error(w, `{"object":"error","message":"too long"}`, 400)
			return true
		}
		return false
	})
	clock, _ := timescale.New(1)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {sessionOf("a", 5)}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: 5 * time.Second, Seed: 1, Sink: col.add,
	})
	g.SetTag(Tag{Phase: PhaseMeasure})
	g.SetSessions(1)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		unsent := 0
		for _, r := range col.all() {
			if r.Error == ErrUnsent {
				unsent++
			}
		}
		if unsent >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.Stop(time.Second)
	var refused, unsent int
	for _, r := range col.all() {
		switch r.Error {
		case ErrRefused:
			refused++
		case ErrUnsent:
			unsent++
			if r.Status != 0 {
				t.Errorf("an unsent turn has status %d", r.Status)
			}
		}
	}
	if refused == 0 || unsent == 0 {
		t.Errorf("refused %d, unsent %d: a refusal must end the conversation and count the turns it never sent", refused, unsent)
	}
}
