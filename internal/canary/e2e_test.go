package canary_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/canary"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/record"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// sharedCorpus is the shared traces, beside the repository.
const sharedCorpus = "../../../shared/traces/weka-claude-code.jsonl.gz"

// sharedSessions reads the shared corpus and keeps the first turns of its
// first n sessions, prompts cut to at most maxIn tokens (their leading hash
// blocks kept, so turns still share their prefixes) and answers to maxOut:
// live-like sessions that turn over within a few modelled minutes.
func sharedSessions(t *testing.T, n, turns, maxIn, maxOut int) []load.Session {
	t.Helper()
	if _, err := os.Stat(sharedCorpus); err != nil {
		if os.Getenv("HEADROOM_REQUIRE_SHARED") == "1" {
			t.Fatalf("shared corpus %s is missing and HEADROOM_REQUIRE_SHARED=1: %v", sharedCorpus, err)
		}
		t.Skipf("shared corpus %s is absent (%v); set HEADROOM_REQUIRE_SHARED=1 to make this a failure", sharedCorpus, err)
	}
	traces, err := trace.ReadPath(sharedCorpus)
	if err != nil {
		t.Fatal(err)
	}
	var out []load.Session
	for _, tr := range traces {
		if len(out) == n {
			break
		}
		all := tr.Turns()
		if len(all) < 2 {
			continue
		}
		kept := make([]trace.Turn, 0, turns)
		for _, tu := range all[:min(turns, len(all))] {
			tu.In = min(tu.In, maxIn)
			tu.Out = max(1, min(tu.Out, maxOut))
			if b := tu.BlockSize; b > 0 {
				tu.HashIDs = tu.HashIDs[:min(len(tu.HashIDs), tu.In/b)]
			}
			kept = append(kept, tu)
		}
		out = append(out, load.Session{ID: tr.ID, Tier: "light", Turns: kept})
	}
	return out
}

// counted serves a simulator and counts the chat requests it was given.
type counted struct {
	h     http.Handler
	chats atomic.Int64
}

func (c *counted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions") {
		c.chats.Add(1)
	}
	c.h.ServeHTTP(w, r)
}

// side is one recipe: a simulator behind its recording proxy.
type side struct {
	sim     *sim.Sim
	srv     *counted
	url     string
	rec     *record.Recorder
	out     *record.File
	path    string
	scraper *signal.Scraper
}

func startSide(t *testing.T, ctx context.Context, clock *timescale.Clock, mnet *memnet.Net, name string, seed uint64) *side {
	t.Helper()
	s, err := sim.New(sim.Options{Profile: sim.DefaultProfile(), Seed: seed, Clock: clock, Net: mnet})
	if err != nil {
		t.Fatal(err)
	}
	sd := &side{sim: s, srv: &counted{h: s.Handler()}, path: filepath.Join(t.TempDir(), name+".jsonl.gz")}
	sd.url = mnet.Serve(sd.srv)
	clock.Go(func() { _ = s.Run(ctx) })
	u, _ := url.Parse(sd.url)
	if sd.out, err = record.CreateFile(sd.path, false); err != nil {
		t.Fatal(err)
	}
	sd.rec, err = record.New(record.Options{Upstream: u, Transport: canary.MarkUnreached(mnet.Transport()), Out: sd.out, Gzip: true,
		Tokenize: record.TokenizeOff, Idle: 10 * time.Minute, Now: clock.Time})
	if err != nil {
		t.Fatal(err)
	}
	sd.scraper = &signal.Scraper{Targets: []string{sd.url + "/metrics"}, Mapping: signal.VLLM(), Client: mnet.Client(), Sequential: true}
	return sd
}

// TestCanaryOnSharedTraces replays sessions of the shared traces through
// the canary's router into two simulators on a virtual clock (so the run
// is the same on a busy host or an idle one): the candidate's share rises
// while it holds the bar and is no worse than the baseline, then the
// candidate is made worse (it refuses most requests) and the share goes
// back to 0 at the next window; every request the client sent reached one
// of the two servers and was answered, and both sides' sessions were
// recorded.
func TestCanaryOnSharedTraces(t *testing.T) {
	sessions := sharedSessions(t, 60, 8, 4096, 96)
	const lanes = 40
	clock := timescale.NewVirtual()
	mnet := memnet.New(clock)
	plan := canary.Plan{
		Shares: []float64{0.1, 0.3, 0.5},
		Hold:   2 * time.Minute, MaxHold: 6 * time.Minute,
		Window: 30 * time.Second, Scrape: 5 * time.Second,
		Bar:     verdict.Bar{TTFTP90: 5, InteractivityP90: 10, ErrorRate: 0.1},
		Options: verdict.Options{Resamples: 400, Seed: 1, Confidence: 0.95, MinSentFraction: 0.95},
		Kill:    canary.Kill{QueuePerSession: 4, ErrorRate: 0.5, TTFTFactor: 4},
		NoWorse: canary.NoWorse{Tolerance: 0.5, ErrorPoints: 0.05},
	}
	var (
		res                 canary.Result
		runErr              error
		base, cand          *side
		worsenedAt          = -1.0
		atRollback          canary.Snapshot
		mu                  sync.Mutex
		sent, lost, records int
		lostWhy             []string
	)
	clock.Run(func() {
		ctx, cancel := clock.WithCancel(context.Background())
		defer cancel()
		base = startSide(t, ctx, clock, mnet, "baseline", 1)
		cand = startSide(t, ctx, clock, mnet, "candidate", 2)
		router, err := canary.NewRouter(canary.RouterOptions{Clock: clock, Baseline: base.rec.Handler(), Candidate: cand.rec.Handler()})
		if err != nil {
			t.Fatal(err)
		}
		front := mnet.Serve(router)
		client := load.NewClientConn(front, sim.DefaultProfile().Model, transport.Conn{RoundTripper: mnet.Transport()})
		gen := load.NewGenerator(load.Options{
			Client: client, Clock: clock,
			Tiers: map[string][]load.Session{"light": sessions}, Mix: []load.TierShare{{Tier: "light", Share: 1}},
			Prompts:   prompt.Builder{Seed: 7},
			ThinkTime: load.ThinkCapped, ThinkCap: 5 * time.Second,
			Timeout: 5 * time.Minute, Seed: 3,
			Sink: func(r load.Record) {
				mu.Lock()
				defer mu.Unlock()
				records++
				if r.ReachedServer() {
					sent++
				}
				if r.Error == load.ErrConnect || r.Error == load.ErrStream || r.Error == load.ErrAborted || r.Error == load.ErrTimeout {
					lost++
					lostWhy = append(lostWhy, r.Error+": "+r.Detail)
				}
			},
		})
		gen.SetSessions(lanes)
		// live traffic is flowing before the canary begins: caches are warm
		// and every counter the bar reads is exposed on both sides
		_ = clock.Sleep(ctx, 90*time.Second)
		ctl := &canary.Controller{Plan: plan, Clock: clock, Router: router, Scrapers: [2]canary.Scraper{base.scraper, cand.scraper},
			Log: t.Logf,
			OnTick: func(tk canary.Tick) {
				t.Logf("t=%4.0fs share %3.0f%% windows %d: baseline %s (%d req), candidate %s (%d req), no worse %s: %s: %s",
					tk.At, 100*tk.Share, tk.Windows, tk.Baseline.Verdict, tk.Baseline.Requests, tk.Candidate.Verdict, tk.Candidate.Requests, tk.NoWorse.Verdict, tk.Decision, tk.Why)
				if tk.Windows == 4 {
					for _, sd := range []canary.Side{tk.Baseline, tk.Candidate} {
						for _, p := range sd.Step.Parts {
							t.Logf("  %s %s %s missing %v warnings %v", p.Name, p.Verdict, p.Value, p.Missing, p.Value.Warnings)
						}
						t.Logf("  step warnings %v", sd.Step.Warnings)
					}
				}
				if tk.Decision == "rollback" {
					atRollback = tk.Router
				}
				// made worse two windows into the last share: it refuses
				// nine requests in ten, as an overloaded server does
				if worsenedAt < 0 && tk.Step == len(plan.Shares)-1 && tk.Windows == 2 {
					if err := cand.sim.SetFaults(sim.Faults{Refuse: &sim.Refusals{Share: 0.9, Status: http.StatusServiceUnavailable}}); err != nil {
						t.Errorf("worsening the candidate: %v", err)
					}
					worsenedAt = tk.At
				}
			}}
		res, runErr = ctl.Run(ctx)
		// the load goes on a while after the rollback: all of it to the baseline
		_ = clock.Sleep(ctx, time.Minute)
		after := router.Snapshot()
		gen.Stop(10 * time.Minute)
		final := router.Snapshot()
		if atRollback.Share == 0 && final.Counts[canary.Candidate].Requests != atRollback.Counts[canary.Candidate].Requests {
			t.Errorf("the candidate was sent %d requests after the rollback (%d at it, %d at the end)",
				final.Counts[canary.Candidate].Requests-atRollback.Counts[canary.Candidate].Requests, atRollback.Counts[canary.Candidate].Requests, final.Counts[canary.Candidate].Requests)
		}
		if after.InFlight[canary.Candidate] != 0 {
			t.Errorf("%d requests still in flight on the candidate a minute after the rollback", after.InFlight[canary.Candidate])
		}
		res.Final = final
		cancel()
	})
	closeSide(t, base)
	closeSide(t, cand)
	if runErr != nil {
		t.Fatal(runErr)
	}
	t.Logf("outcome %s: %s", res.Outcome, res.Reason)
	for _, s := range res.Steps {
		t.Logf("share %3.0f%% from %4.0fs to %4.0fs: %s", 100*s.Share, s.StartS, s.EndS, s.Outcome)
	}
	if dir := os.Getenv("HEADROOM_CANARY_OUT"); dir != "" {
		if err := res.Write(dir); err != nil {
			t.Error(err)
		}
	}

	// the share rose while the candidate held, and fell back at once
	if len(res.Steps) != len(plan.Shares) || res.Steps[0].Outcome != "raise" || res.Steps[1].Outcome != "raise" {
		t.Fatalf("steps %+v: want the candidate raised through the first two shares", res.Steps)
	}
	if res.Outcome != canary.Failed || res.Steps[2].Outcome != "rollback" {
		t.Fatalf("outcome %s (%s), last step %+v: want the worsened candidate rolled back", res.Outcome, res.Reason, res.Steps[2])
	}
	if worsenedAt < 0 {
		t.Fatal("the candidate was never made worse")
	}
	last := res.Ticks[len(res.Ticks)-1]
	if waited := last.At - worsenedAt; waited > plan.Window.Seconds()/2 {
		t.Errorf("rolled back %.0fs after the candidate was made worse: want within half a window", waited)
	}
	if res.Final.Share != 0 {
		t.Errorf("share %g after the rollback, want 0", res.Final.Share)
	}
	for _, tk := range res.Ticks {
		if tk.At <= worsenedAt && tk.Candidate.Verdict == verdict.Fail {
			t.Errorf("t=%.0fs: the candidate failed before it was made worse", tk.At)
		}
	}

	// no request lost: what the client sent is what the servers were given
	c := res.Final.Counts
	served := base.srv.chats.Load() + cand.srv.chats.Load()
	t.Logf("client: %d records, %d reached the router; router: baseline %d requests (%d sessions), candidate %d (%d sessions); servers: baseline %d, candidate %d",
		records, sent, c[canary.Baseline].Requests, c[canary.Baseline].Sessions, c[canary.Candidate].Requests, c[canary.Candidate].Sessions, base.srv.chats.Load(), cand.srv.chats.Load())
	if lost > 0 {
		t.Errorf("%d requests lost or cut (first: %s)", lost, lostWhy[0])
	}
	if int64(sent) != served || sent != c[canary.Baseline].Requests+c[canary.Candidate].Requests {
		t.Errorf("client sent %d, router routed %d, servers were given %d: want all equal", sent, c[canary.Baseline].Requests+c[canary.Candidate].Requests, served)
	}
	if int64(c[canary.Baseline].Requests) != base.srv.chats.Load() || int64(c[canary.Candidate].Requests) != cand.srv.chats.Load() {
		t.Errorf("router sent baseline %d / candidate %d, servers got %d / %d", c[canary.Baseline].Requests, c[canary.Candidate].Requests, base.srv.chats.Load(), cand.srv.chats.Load())
	}
	if c[canary.Baseline].NotReached+c[canary.Candidate].NotReached > 0 {
		t.Errorf("%d requests did not reach their side", c[canary.Baseline].NotReached+c[canary.Candidate].NotReached)
	}

	// both sides' sessions were recorded, as headroom record does
	for _, sd := range []*side{base, cand} {
		trs, err := trace.ReadPath(sd.path)
		if err != nil {
			t.Fatalf("%s: %v", sd.path, err)
		}
		st := sd.rec.Stats()
		t.Logf("%s: %s", filepath.Base(sd.path), st)
		if len(trs) == 0 || st.Recorded == 0 || st.Dropped() > 0 {
			t.Errorf("%s: %d traces, %d requests recorded, %d dropped: want the side's sessions recorded", sd.path, len(trs), st.Recorded, st.Dropped())
		}
	}
}

func closeSide(t *testing.T, sd *side) {
	t.Helper()
	if sd == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sd.rec.Close(ctx); err != nil {
		t.Error(err)
	}
	if err := sd.out.Close(); err != nil {
		t.Error(err)
	}
	_ = sd.sim.Close()
}
