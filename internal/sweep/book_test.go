package sweep

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
)

func TestBookKeepsEachTryOfATurnPending(t *testing.T) {
	// A turn's first try failed and its retry went out at the same modelled
	// instant (a coarse clock): both are requests of the step.
	b := NewBook(nil)
	first := load.Record{V: load.RecordVersion, Step: 0, Phase: load.PhaseMeasure, Lane: 1, Play: 2, Turn: 3, Send: 10}
	retry := first
	retry.Attempt = 1
	b.Sent(first)
	b.Sent(retry)
	first.Error, first.Status = load.ErrRefused, http.StatusTooManyRequests
	b.Add(first)
	recs := b.Step(0, load.PhaseMeasure)
	pending := 0
	for _, r := range recs {
		if r.Pending {
			pending++
		}
	}
	if len(recs) != 2 || pending != 1 {
		t.Errorf("the step holds %d records, %d pending; want the failed try and the retry still in flight", len(recs), pending)
	}
}

// reseedLoad is a fakeLoad that notes when the sweep asks for fresh plays.
type reseedLoad struct {
	*fakeLoad
	mu     sync.Mutex
	epochs []int
	atStep []int // the tag's step when each Reseed came
}

func (r *reseedLoad) Reseed(epoch int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epochs = append(r.epochs, epoch)
	step := -1
	if t := r.tag.Load(); t != nil {
		step = t.Step
	}
	r.atStep = append(r.atStep, step)
}

// TestRepeatsDrawFreshPlays runs in a synctest bubble, as the runner's
// other tests do: on the wall clock at x1000 a loaded host read its first
// step no data and never repeated (issue 22.1).
func TestRepeatsDrawFreshPlays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fl := newRunner(t, []int{2, 4, 6, 8, 10}, 1.2)
		r.Plan.Repeat = true
		rl := &reseedLoad{fakeLoad: fl}
		r.Load = rl
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		firstRepeat := -1
		for _, s := range res.Steps {
			if s.RepeatOf >= 0 {
				firstRepeat = s.Index
				break
			}
		}
		if firstRepeat < 0 {
			t.Fatal("no step was repeated")
		}
		// the last climbing step's end labels what follows as the next step's
		if len(rl.epochs) == 0 || rl.epochs[0] == 0 || rl.atStep[0] != firstRepeat {
			t.Errorf("Reseed calls %v at steps %v; want one with a new epoch before the first repeat (step %d)", rl.epochs, rl.atStep, firstRepeat)
		}
	})
}

// refuser streams like vLLM and refuses the listed requests (1-based) with
// a 400, as context too long.
func refuser(t *testing.T, refuse map[int]bool) *httptest.Server {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		no := refuse[n]
		mu.Unlock()
		if no {
			http.Error(w, `{"object":"error","message":"maximum context length exceeded"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":1,"total_tokens":121}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestUnsentTurnsFillTheWindowsTheyWouldHaveBeenSentIn(t *testing.T) {
	// Two lanes, turns 2 s of think time apart within a play, a 60 s judged
	// time in six 10 s windows; two early requests are refused and their
	// conversations end with up to 300 turns unsent (594 counted at the
	// refusal before). Each window's planned turns must hold its errors, and
	// the unsent turns spread over the windows after the refusal at the
	// lanes' pace, never all in the refusal's window.
	srv := refuser(t, map[int]bool{5: true, 6: true})
	var s load.Session
	s.ID, s.Tier = "long", "light"
	for i := range 300 {
		s.Turns = append(s.Turns, trace.Turn{Index: i, Start: 2 * float64(i), ThinkTime: 2, In: 100, Out: 1, HashIDs: []int64{1, 2}})
	}
	clock, _ := timescale.New(100)
	book := NewBook(nil)
	g := load.NewGenerator(load.Options{
		Client: load.NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]load.Session{"light": {s}}, Mix: []load.TierShare{{Tier: "light", Share: 1}},
		Prompts: prompt.Builder{Seed: 1, BlockSize: 64}, ThinkTime: load.ThinkRecorded,
		Timeout: time.Hour, Seed: 2, Sink: book.Add, OnSend: book.Sent,
	})
	start := clock.Now()
	g.SetTag(load.Tag{Step: 0, Sessions: 2, Phase: load.PhaseMeasure})
	g.SetSessions(2)
	clock.Sleep(context.Background(), 60*time.Second)
	g.SetTag(load.Tag{Step: 1, Sessions: 2, Phase: load.PhaseWarmup})
	g.Stop(5 * time.Second)
	var windows []signal.Window
	for k := range 6 {
		windows = append(windows, signal.Window{Start: start + time.Duration(k)*10*time.Second, End: start + time.Duration(k+1)*10*time.Second})
	}
	loads, sum := loadWindows(book.Step(0, load.PhaseMeasure), windows)
	most := 0
	for k, w := range loads {
		t.Logf("window %d: %d planned, %d sent, %d unsent, %d client errors", k, w.Planned, w.Sent, w.Unsent, w.ClientErrors)
		if errs := w.Unsent + w.NotReached + w.ClientErrors; errs > w.Planned {
			t.Errorf("window %d counts %d errors of %d planned turns", k, errs, w.Planned)
		}
		most = max(most, w.Unsent)
	}
	if sum.Unsent == 0 {
		t.Fatal("no unsent turn was counted for the refused conversations")
	}
	// two refused conversations lose at most 60 s worth of turns each; a
	// lane's pace is a turn per 2 s inside a play, faster only across the
	// start of a new play (no think time): allow twice as fast
	if most := 2 * (60 + 1); sum.Unsent > most {
		t.Errorf("%d unsent turns in a 60 s step of 2 lanes pacing about a turn per 2 s: more than the %d they could have sent", sum.Unsent, most)
	}
	if most == sum.Unsent {
		t.Errorf("all %d unsent turns fell in one window: they must be stamped when they would have gone out", sum.Unsent)
	}
}

// TestDescentsDrawFreshPlays: a step an adaptive sweep takes down from a
// step that missed (bisecting) draws fresh plays with an epoch of its own,
// before its lanes come back: replaying the same
// traces, they met a prefix cache warm with their own prompts and read
// faster than the recipe is (issue 21: reference 0 bisecting from 15 down
// to 12 read a pass at 10.3 tok/s against a truth of 7.7).
func TestDescentsDrawFreshPlays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// TTFT = sessions x 1.2 s: 2, 4 pass; 8 misses, then 6 and 7 (down from 8)
		r, fl := newRunner(t, []int{2, 16}, 1.2)
		r.Plan.Adaptive, r.Plan.Resolution = true, 1
		rl := &reseedLoad{fakeLoad: fl}
		r.Load = rl
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		down := -1
		for i, s := range res.Steps {
			if i > 0 && s.Sessions < res.Steps[i-1].Sessions {
				down = s.Index
				break
			}
		}
		if down < 0 {
			t.Fatalf("steps %v: no step down", res.Steps)
		}
		rl.mu.Lock()
		defer rl.mu.Unlock()
		seen := map[int]bool{}
		found := false
		for k, e := range rl.epochs {
			if seen[e] || e == 0 || e == 1 || e == 2 {
				t.Errorf("Reseed epochs %v: want each descent's its own, apart from 0 (the first plays), 1 (repeats) and 2 (settle)", rl.epochs)
			}
			seen[e] = true
			// the last step before the descent labels what follows
			found = found || rl.atStep[k] == down-1 || rl.atStep[k] == down
		}
		if !found {
			t.Errorf("Reseed calls %v at steps %v: want one before step %d, the first down from a miss", rl.epochs, rl.atStep, down)
		}
	})
}
