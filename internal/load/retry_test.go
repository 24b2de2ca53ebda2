package load

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// standIn is an independent vLLM stand-in: it streams like vLLM and turns
// away a seeded random share of requests, half with 429 and a Retry-After
// of 2 s, half with 503, counting what it did.
type standIn struct {
	mu       sync.Mutex
	rng      *rand.Rand
	share    float64
	requests int
	injected int
}

func newStandIn(t *testing.T, share float64, seed uint64) (*standIn, *httptest.Server) {
	s := &standIn{rng: rand.New(rand.NewPCG(seed, 99)), share: share}
	srv := sseServer(t, 3, func(w http.ResponseWriter, r *http.Request) bool {
		s.mu.Lock()
		s.requests++
		fail := s.rng.Float64() < s.share
		code := http.StatusServiceUnavailable
		if fail {
			s.injected++
			if s.rng.IntN(2) == 0 {
				code = http.StatusTooManyRequests
			}
		}
		s.mu.Unlock()
		if !fail {
			return false
		}
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(retryAfterS)))
		}
		http.Error(w, `{"object":"error","message":"the server is busy","type":"ServiceUnavailableError","code":`+http.StatusText(code)+`}`, code)
		return true
	})
	return s, srv
}

func (s *standIn) counts() (requests, injected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.injected
}

// pacedSession is a conversation of n turns a trace paced at 2 s apart.
func pacedSession(id string, n int) Session {
	s := sessionOf(id, n)
	for i := range s.Turns {
		s.Turns[i].Start = 2 * float64(i)
	}
	return s
}

// retryAfterS is the stand-in's Retry-After on a 429, in seconds.
const retryAfterS = 2.0

// isRetryStatus is what the stand-in injects.
func isRetryStatus(r Record) bool {
	return r.Status == http.StatusTooManyRequests || r.Status == http.StatusServiceUnavailable
}

// turnKey names one turn of one play of one lane: its attempts share it.
type turnKey struct {
	lane, play, turn int
	agent            string
}

func TestRetriesKeepTheErrorShareAtTheInjectedShare(t *testing.T) {
	for _, c := range []struct {
		name   string
		share  float64
		lo, hi float64 // the counted error share must fall here
	}{
		{"1% injected", 0.01, 0.004, 0.02},
		{"10% injected", 0.10, 0.07, 0.13},
	} {
		t.Run(c.name, func(t *testing.T) {
			si, srv := newStandIn(t, c.share, 12)
			// 1000 modelled seconds pass per wall second: a backoff of 1 s
			// modelled takes 1 ms; a request's deadline of an hour, 3.6 s
			clock, _ := timescale.New(1000)
			col := &collector{}
			g := NewGenerator(Options{
				Client: NewClient(srv.URL, "m"), Clock: clock,
				Tiers: map[string][]Session{"light": {pacedSession("a", 36), pacedSession("b", 36), pacedSession("c", 36)}},
				Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
				ThinkTime: ThinkNone, Timeout: time.Hour, Seed: 5, Sink: col.add,
			})
			g.SetTag(Tag{Step: 0, Sessions: 4, Phase: PhaseMeasure})
			g.SetSessions(4)
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				if n, _ := si.counts(); n >= 3000 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			g.Stop(5 * time.Second)
			requests, injected := si.counts()
			recs := col.all()
			planned, errs, unsent, statusErrs, aborted := 0, 0, 0, 0, 0
			for _, r := range recs {
				if isRetryStatus(r) {
					statusErrs++
				}
				if r.Error == ErrAborted {
					aborted++
				}
				if r.Phase != PhaseMeasure {
					continue
				}
				planned++
				if r.Failed() {
					errs++
				}
				if r.Error == ErrUnsent {
					unsent++
				}
			}
			if requests < 1000 {
				t.Fatalf("the stand-in saw only %d requests in 30 s", requests)
			}
			if statusErrs != injected {
				t.Errorf("the stand-in injected %d failures and the records hold %d: every failed attempt is a record of its own", injected, statusErrs)
			}
			got := float64(errs) / float64(planned)
			t.Logf("injected %d of %d requests (%.2f%%); counted %d errors of %d planned turns (%.2f%%), %d of them unsent, %d aborted at the stop",
				injected, requests, 100*float64(injected)/float64(requests), errs, planned, 100*got, unsent, aborted)
			if got < c.lo || got > c.hi {
				t.Errorf("counted error share %.2f%% with %.0f%% injected, want within [%.1f%%, %.1f%%]: a retried 429 or 503 must not end its conversation",
					100*got, 100*c.share, 100*c.lo, 100*c.hi)
			}
			checkNoConversationEndedOnARetry(t, recs, DefaultRetry().Attempts)
		})
	}
}

// checkNoConversationEndedOnARetry checks that a turn that got a 429 or 503
// was tried again, unless it had used all its attempts or its lane stopped
// (it is then its lane's last request).
func checkNoConversationEndedOnARetry(t *testing.T, recs []Record, attempts int) {
	t.Helper()
	byTurn := map[turnKey][]Record{}
	lastOfLane := map[int]float64{}
	for _, r := range recs {
		if r.Error == ErrUnsent || r.Phase == PhasePrime {
			continue
		}
		k := turnKey{r.Lane, r.Play, r.Turn, r.Agent}
		byTurn[k] = append(byTurn[k], r)
		lastOfLane[r.Lane] = max(lastOfLane[r.Lane], r.Send)
	}
	exhausted := 0
	for k, rs := range byTurn {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Send < rs[j].Send })
		last := rs[len(rs)-1]
		if len(rs) > attempts {
			t.Errorf("turn %+v was tried %d times, more than the %d attempts allowed", k, len(rs), attempts)
		}
		for j := 1; j < len(rs); j++ {
			// a lower bound: a wait on the clock is never shorter than asked
			if prev := rs[j-1]; prev.Status == http.StatusTooManyRequests && rs[j].Send-prev.Send < retryAfterS {
				t.Errorf("turn %+v was retried %.2fs after a 429 that said Retry-After: %g", k, rs[j].Send-prev.Send, retryAfterS)
			}
			if rs[j].Attempt != j {
				t.Errorf("try %d of turn %+v is recorded as attempt %d", j, k, rs[j].Attempt)
			}
		}
		if !isRetryStatus(last) {
			continue
		}
		if len(rs) == attempts {
			exhausted++
			continue
		}
		if last.Send < lastOfLane[k.lane] {
			t.Errorf("turn %+v ended its conversation on HTTP %d after %d of %d attempts", k, last.Status, len(rs), attempts)
		}
	}
	if exhausted > 0 {
		t.Logf("%d turns ran out of retries", exhausted)
	}
}

// storm503 answers every request 503, counting them.
func storm503(t *testing.T) (*sync.Mutex, *int, *httptest.Server) {
	return stormWith(t, http.StatusServiceUnavailable)
}

// stormWith serves status to every request, counting them.
func stormWith(t *testing.T, status int) (*sync.Mutex, *int, *httptest.Server) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		http.Error(w, `{"object":"error","message":"engine is loading"}`, status)
	}))
	t.Cleanup(srv.Close)
	return &mu, &n, srv
}

// stormBound is the most requests one sender can make in elapsed under the
// retry policy's schedule when every request fails: the k-th consecutive
// failure is followed by a wait of at least half of min(Max, Base*2^(k-1)),
// so request j+1 goes out no sooner than the sum of the first j waits.
func stormBound(p RetryPolicy, elapsed time.Duration) int {
	n, at := 1, time.Duration(0)
	for k := 1; ; k++ {
		d := p.Base << (k - 1)
		if d > p.Max || d <= 0 {
			d = p.Max
		}
		at += d / 2
		if at > elapsed {
			return n
		}
		n++
	}
}

func TestRefusingEndpointSeesABoundedNumberOfRequests(t *testing.T) {
	// 503: what a retry gets past, until the tries run out; 400: a refusal
	// that ends each conversation at once (it stormed: no wait before the
	// next conversation)
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusBadRequest} {
		t.Run(strconv.Itoa(status), func(t *testing.T) { refusingEndpoint(t, status) })
	}
}

func refusingEndpoint(t *testing.T, status int) {
	mu, n, srv := stormWith(t, status)
	// a 60 s step runs in 0.3 s of wall time
	clock, _ := timescale.New(200)
	col := &collector{}
	const lanes = 3
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {pacedSession("a", 36), pacedSession("b", 36)}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: time.Hour, Seed: 9, Sink: col.add,
	})
	g.SetTag(Tag{Step: 0, Sessions: lanes, Phase: PhaseMeasure})
	began := clock.Now()
	g.SetSessions(lanes)
	clock.Sleep(context.Background(), 60*time.Second)
	g.Stop(5 * time.Second)
	elapsed := clock.Now() - began
	mu.Lock()
	requests := *n
	mu.Unlock()
	bound := lanes * stormBound(DefaultRetry(), elapsed)
	recs := col.all()
	t.Logf("HTTP %d for %v of modelled time: %d requests (bound %d from the backoff schedule), %d records", status, elapsed.Round(time.Second), requests, bound, len(recs))
	if requests < lanes {
		t.Fatalf("the endpoint saw %d requests, want at least one per lane", requests)
	}
	if requests > bound {
		t.Errorf("the endpoint saw %d requests in %v, more than the %d the backoff schedule allows %d lanes: the lanes storm it", requests, elapsed, bound, lanes)
	}
	// each conversation ends after its attempts, and its unsent turns come
	// no faster than the trace's pace (2 s) until the step ends
	perLane := stormBound(DefaultRetry(), elapsed)
	conversations := lanes * (perLane/DefaultRetry().Attempts + 1)
	if status == http.StatusBadRequest {
		conversations = requests // each refusal ends its conversation
	}
	if most := requests + conversations*int(elapsed/(2*time.Second)+1); len(recs) > most {
		t.Errorf("%d records for %d requests: more than the %d that %d ended conversations can leave unsent at the trace's pace", len(recs), requests, most, conversations)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"Tue, 01 Dec 2026 10:00:05 GMT", 5 * time.Second, true},
		{"Tue, 01 Dec 2026 09:59:00 GMT", 0, true}, // a date in the past: now
		{"-4", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		got, ok := parseRetryAfter(c.value, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Retry-After %q: %v %v, want %v %v", c.value, got, ok, c.want, c.ok)
		}
	}
}

func TestBackoffGrowsIsCappedAndHonoursRetryAfter(t *testing.T) {
	p := DefaultRetry()
	for k := 1; k <= 12; k++ {
		full := min(p.Base<<(k-1), p.Max)
		for u := 0.0; u < 1; u += 0.25 {
			d := p.delay(k, u, 0)
			if d < full/2 || d > full {
				t.Errorf("failure %d, jitter %.2f: wait %v, want within [%v, %v]", k, u, d, full/2, full)
			}
		}
	}
	if d := p.delay(1, 0, 10*time.Second); d != 10*time.Second {
		t.Errorf("a Retry-After of 10 s after one failure waited %v", d)
	}
	if d := p.delay(1, 0, time.Hour); d != p.Max {
		t.Errorf("a Retry-After of an hour waited %v, want the cap %v", d, p.Max)
	}
}

// refuseNth answers like vLLM but refuses the nth request (1-based) with a
// 400, as a context-too-long refusal.
func refuseNth(t *testing.T, nth int) *httptest.Server {
	var mu sync.Mutex
	seen := 0
	return sseServer(t, 3, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		seen++
		refuse := seen == nth
		mu.Unlock()
		if refuse {
			http.Error(w, `{"object":"error","message":"maximum context length exceeded"}`, http.StatusBadRequest)
		}
		return refuse
	})
}

func TestUnsentTurnsArePacedAndEndWithTheirTime(t *testing.T) {
	// One lane, turns 2 s of think time apart; the 6th request is refused,
	// so its conversation ends with 30 turns unsent. The step ends 10 s
	// after the refusal: only the unsent turns the lane would have sent by
	// then at its pace count, each at its own time.
	srv := refuseNth(t, 6)
	s := pacedSession("a", 36)
	for i := range s.Turns {
		s.Turns[i].ThinkTime = 2
	}
	clock, _ := timescale.New(100)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": {s}},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkRecorded, Timeout: time.Hour, Seed: 1, Sink: col.add,
	})
	g.SetTag(Tag{Step: 0, Sessions: 1, Phase: PhaseMeasure})
	g.SetSessions(1)
	var refused Record
	deadline := time.Now().Add(10 * time.Second)
	for refused.Status == 0 && time.Now().Before(deadline) {
		for _, r := range col.all() {
			if r.Error == ErrRefused {
				refused = r
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if refused.Status == 0 {
		g.Stop(time.Second)
		t.Fatal("no request was refused in 10 s")
	}
	clock.Sleep(context.Background(), 10*time.Second)
	g.SetTag(Tag{Step: 1, Sessions: 1, Phase: PhaseWarmup})
	end := clock.Now().Seconds()
	g.Stop(5 * time.Second)
	var ghosts []Record
	var before []Record // the lane's turns sent in the step before the refusal
	for _, r := range col.all() {
		if r.Phase != PhaseMeasure {
			continue
		}
		if r.Error == ErrUnsent && r.Play == refused.Play {
			ghosts = append(ghosts, r)
		} else if r.Error != ErrUnsent && r.Send < refused.Send {
			before = append(before, r)
		}
	}
	sort.Slice(ghosts, func(i, j int) bool { return ghosts[i].Send < ghosts[j].Send })
	remaining := len(s.Turns) - 1 - refused.Turn
	t.Logf("refused turn %d at %.1fs; %d of its %d later turns counted unsent, at %v; the step ended at %.1fs", refused.Turn, refused.Send, len(ghosts), remaining, sends(ghosts), end)
	if len(ghosts) == 0 {
		t.Fatal("no unsent turn was counted for the refused conversation")
	}
	if len(before) < 2 {
		t.Fatalf("only %d turns of the play before the refusal; want a pace to observe", len(before))
	}
	sort.Slice(before, func(i, j int) bool { return before[i].Send < before[j].Send })
	pace := (refused.Send - before[0].Send) / float64(len(before))
	if most := int((end-refused.Send)/pace) + 1; len(ghosts) > most {
		t.Errorf("%d unsent turns counted in the %.1fs after the refusal; at the lane's pace of %.2fs it would have sent at most %d", len(ghosts), end-refused.Send, pace, most)
	}
	for k, r := range ghosts {
		if r.Send > end {
			t.Errorf("unsent turn %d is stamped at %.2fs, after its step ended at %.2fs", r.Turn, r.Send, end)
		}
		if k > 0 && r.Send-ghosts[k-1].Send < pace/2 {
			t.Errorf("unsent turns %d and %d are stamped %.3fs apart; the lane's pace is %.2fs", ghosts[k-1].Turn, r.Turn, r.Send-ghosts[k-1].Send, pace)
		}
		if r.Send <= refused.Send {
			t.Errorf("unsent turn %d is stamped at %.2fs, not after the refusal at %.2fs", r.Turn, r.Send, refused.Send)
		}
	}
}

func sends(rs []Record) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, float64(int(r.Send*10))/10)
	}
	return out
}

func TestRestartedLanesDrawFreshPlays(t *testing.T) {
	srv := sseServer(t, 2, nil)
	var pool []Session
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		pool = append(pool, pacedSession(id, 40))
	}
	clock, _ := timescale.New(1000)
	col := &collector{}
	g := NewGenerator(Options{
		Client: NewClient(srv.URL, "m"), Clock: clock,
		Tiers: map[string][]Session{"light": pool},
		Mix:   []TierShare{{"light", 1}}, Prompts: prompt.Builder{Seed: 1, BlockSize: 64},
		ThinkTime: ThinkNone, Timeout: time.Hour, Seed: 3, Sink: col.add,
	})
	const lanes = 4
	first := func(step int) map[int]Record {
		out := map[int]Record{}
		for _, r := range col.all() {
			if r.Step != step || r.Phase != PhaseMeasure {
				continue
			}
			if f, ok := out[r.Lane]; !ok || r.Send < f.Send {
				out[r.Lane] = r
			}
		}
		return out
	}
	run := func(step int) {
		g.SetTag(Tag{Step: step, Sessions: lanes, Phase: PhaseMeasure})
		g.SetSessions(lanes)
		deadline := time.Now().Add(5 * time.Second)
		for len(first(step)) < lanes && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		g.SetSessions(0)
		_ = g.wg.Wait(context.Background())
	}
	run(0)
	if rs, ok := any(g).(interface{ Reseed(epoch int) }); ok {
		rs.Reseed(1)
	} else {
		t.Error("the generator has no Reseed(epoch int) for a repeat to draw fresh plays")
	}
	run(1)
	a, b := first(0), first(1)
	same := 0
	plays := map[[2]int]bool{}
	for _, r := range col.all() {
		if r.Step == 0 {
			plays[[2]int{r.Lane, r.Play}] = true
		}
	}
	for lane := range lanes {
		x, y := a[lane], b[lane]
		t.Logf("lane %d: first play %s from turn %d, then %s from turn %d", lane, x.Session, x.Turn, y.Session, y.Turn)
		if x.Session == y.Session && x.Turn == y.Turn {
			same++
		}
		if plays[[2]int{lane, y.Play}] {
			t.Errorf("lane %d's repeat reuses play number %d of its first run", lane, y.Play)
		}
	}
	if same > 0 {
		t.Errorf("%d of %d lanes restarted on the same session and turn: a repeat must draw fresh plays", same, lanes)
	}
}
