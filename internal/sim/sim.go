// Package sim is headroom's simulated inference gateway: an OpenAI-compatible
// server backed by an iteration-level model of an engine (continuous
// batching, chunked prefill, a block prefix cache, KV capacity and
// preemption) that behaves like vLLM or SGLang and exposes that engine's own
// Prometheus metrics in modelled time. It answers tool calls and read-back
// questions so evals can be rehearsed, injects faults on demand (Options.Faults
// and the loopback-only /admin/faults), and runs N copies behind a routing
// gateway with OpenTelemetry gen_ai metrics (Cluster), optionally as a
// prefill/decode split over a link of given bandwidth; a profile may add a
// host-memory cache tier (HostCacheTokens).
//
// The engine keeps a modelled clock and paces it against wall time through
// Options.Scale, so a rehearsal can replay an hour of agent traffic in a
// minute while every metric it reports still reads in modelled seconds.
// docs/simulator.md describes the model, the personalities, the faults and
// the profiles.
package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// Profile describes the modelled model and hardware. Its JSON form uses
// snake_case keys so a profile can be kept in a file.
type Profile struct {
	// Name names the profile (the recipe it stands for).
	Name string `json:"name"`
	// Model is the served model id clients must send.
	Model string `json:"model"`
	// MaxModelLen is the context length; prompt + max_tokens beyond it is refused with HTTP 400.
	MaxModelLen int `json:"max_model_len"`
	// BlockSize is the KV / prefix-cache block in tokens.
	BlockSize int `json:"block_size"`
	// KVCapacityTokens is the KV cache size in tokens (blocks = this / BlockSize).
	KVCapacityTokens int `json:"kv_capacity_tokens"`
	// MaxNumSeqs caps the running batch.
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxBatchedTokens is the per-iteration token budget (decodes first, then chunked prefill).
	MaxBatchedTokens int `json:"max_batched_tokens"`
	// PrefillTokensPerSecond is the compute-bound rate for uncached prompt tokens.
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	// PrefillAttentionSecondsPerKVToken is the extra prefill cost of attention:
	// seconds per prefilled token per token of context it attends to (0 turns it off).
	PrefillAttentionSecondsPerKVToken float64 `json:"prefill_attention_seconds_per_kv_token"`
	// DecodeBaseSeconds is the fixed cost of one iteration (reading the weights).
	DecodeBaseSeconds float64 `json:"decode_base_seconds"`
	// DecodeSecondsPerKVToken is the cost per token of context read by a decode
	// step, summed over the sequences decoding in the iteration.
	DecodeSecondsPerKVToken float64 `json:"decode_seconds_per_kv_token"`
	// KVBytesPerToken is the KV cache's size per token, for transfers: to the
	// decode engines of a prefill/decode split and to and from the host
	// cache tier. 0 means DefaultKVBytesPerToken.
	KVBytesPerToken float64 `json:"kv_bytes_per_token,omitempty"`
	// HostCacheTokens is the host-memory cache tier (HiCache-like) in tokens:
	// prefix blocks evicted from the GPU cache are kept there, least recently
	// used out first, and a later hit costs a transfer at
	// HostBandwidthBytesPerSecond instead of a recompute. 0 turns it off.
	HostCacheTokens int `json:"host_cache_tokens,omitempty"`
	// HostBandwidthBytesPerSecond is the host-to-GPU copy rate for host cache
	// hits (PCIe 5 x16 is ~50 GB/s per GPU); required with HostCacheTokens.
	HostBandwidthBytesPerSecond float64 `json:"host_bandwidth_bytes_per_second,omitempty"`
	// Terms a calibration from another engine may need; each is off at its
	// zero value (see terms.go and docs/simulator.md, "Terms for other
	// engines").
	Terms
}

// DefaultKVBytesPerToken is the KV size per token a profile without one
// is taken to have: DefaultProfile's GLM-4.5-shaped model, 92 layers x 8 KV
// heads x 128 dims x K,V x 2 bytes (BF16).
const DefaultKVBytesPerToken = 376832

// kvBytesPerToken is KVBytesPerToken or its default.
func (p Profile) kvBytesPerToken() float64 {
	if p.KVBytesPerToken > 0 {
		return p.KVBytesPerToken
	}
	return DefaultKVBytesPerToken
}

// DefaultProfile stands for the reference report's recipe 0: a GLM-class MoE
// (~32B active parameters, FP8 weights) served by one vLLM engine over 16 RTX
// PRO 6000 cards (96 GB, ~1.8 TB/s each, PCIe only) with a 512K context.
//
// Reasoning behind the numbers (physical estimates, then tuned against the
// whole pipeline; docs/simulator.md has the figures the default run reaches):
//   - KV capacity 1.37M tokens: 16 x 96 GB at 0.9 utilisation is ~1380 GB;
//     ~400 GB of FP8 weights leave under 1000 GB. A GLM-4.5-shaped model
//     stores ~376 KB of BF16 KV per token (92 layers x 8 KV heads x 128 dims
//     x K,V x 2 bytes), so the bounds are ~2.4M tokens (80 GB of activations
//     and graphs, no KV head stored twice) and ~1.2M (tensor parallel over 16
//     ranks with 8 KV heads stores each head twice). 1.37M is tuned in that
//     range (as if ~30 GB a card went to activations, graphs and
//     communication buffers at 512K context): at ~10 half-heavy sessions
//     (about 1M tokens of live contexts plus subagents) the prefix cache
//     starts to run out, some histories are evicted and recomputed, and the
//     default mix's P90 TTFT at 10 sessions reads 4.2-5.0 s against the
//     reference report's 4.8 s, with P90 interactivity 10.3-10.5 tokens/s
//     against its 12.5: recipe 0 "is the bar at 10", limited by TTFT.
//   - Decode base 22 ms: reading the active experts' ~32 GB of FP8 weights
//     takes ~2 ms at 60% of 16 x 1.8 TB/s; the rest is two tensor-parallel
//     all-reduces per layer over PCIe (cards without NVLink), ~100 us each
//     at small batch, 92 layers.
//   - Decode KV term 30 ns per context token: a step reads ~376 KB per token
//     of context; 16 x 1.8 TB/s would do that in ~13 ns, and long-context
//     attention on PCIe-linked cards runs at well under half of peak. Ten
//     agent sessions at 100K tokens each then decode at 22 + 30 = 52 ms a
//     step, ~19 tokens/s per user before prefill stalls.
//   - Prefill 25K tokens/s: the compute (64 GFLOP a token) would allow
//     several times more; each 8192-token chunk all-reduces ~84 MB of
//     activations twice per layer over PCIe, ~15 GB a chunk, which at
//     ~50 GB/s of PCIe 5 bounds prefill near 25K tokens/s.
//   - Prefill attention 0.2 ns per token-pair: with the terms above, an
//     8192-token chunk at 150K tokens of context costs ~0.33 s + ~0.25 s,
//     stalling every decode in that iteration, as chunked prefill does.
//   - 128 running sequences and an 8192-token iteration budget follow vLLM's
//     defaults for large GPUs.
//
// With the default run's half-heavy/half-light mix the capacity read over
// two runs was 9.3 and 10.1 sessions, limited by TTFT (the reference's
// recipe 0 holds about 10); at 10 sessions P90 interactivity reads ~13.4
// tokens/s (reference 12.5) but P90 TTFT ~1.9 s, under the reference's
// 4.8 s: TTFT rises past the bar as a cliff between 10 and 12 sessions
// (prefix-cache eviction), not gradually.
func DefaultProfile() Profile {
	return Profile{
		Name:                              "glm-16xrtx6000",
		Model:                             "glm-5.3",
		MaxModelLen:                       524288,
		BlockSize:                         16,
		KVCapacityTokens:                  1_370_000,
		MaxNumSeqs:                        128,
		MaxBatchedTokens:                  8192,
		PrefillTokensPerSecond:            25000,
		PrefillAttentionSecondsPerKVToken: 2e-10,
		DecodeBaseSeconds:                 0.022,
		DecodeSecondsPerKVToken:           3e-8,
		KVBytesPerToken:                   DefaultKVBytesPerToken,
	}
}

// Validate reports the first field that cannot describe an engine.
func (p Profile) Validate() error {
	positive := []struct {
		name string
		v    float64
	}{
		{"max_model_len", float64(p.MaxModelLen)},
		{"block_size", float64(p.BlockSize)},
		{"kv_capacity_tokens", float64(p.KVCapacityTokens)},
		{"max_num_seqs", float64(p.MaxNumSeqs)},
		{"max_batched_tokens", float64(p.MaxBatchedTokens)},
		{"prefill_tokens_per_second", p.PrefillTokensPerSecond},
	}
	if p.Model == "" {
		return errors.New("sim profile: model is empty: set the served model id clients will send")
	}
	for _, f := range positive {
		if !(f.v > 0) {
			return fmt.Errorf("sim profile %q: %s is %g: it must be positive", p.Name, f.name, f.v)
		}
	}
	nonNegative := []struct {
		name string
		v    float64
	}{
		{"prefill_attention_seconds_per_kv_token", p.PrefillAttentionSecondsPerKVToken},
		{"decode_base_seconds", p.DecodeBaseSeconds},
		{"decode_seconds_per_kv_token", p.DecodeSecondsPerKVToken},
		{"kv_bytes_per_token", p.KVBytesPerToken},
		{"host_cache_tokens", float64(p.HostCacheTokens)},
		{"host_bandwidth_bytes_per_second", p.HostBandwidthBytesPerSecond},
	}
	for _, f := range nonNegative {
		if !(f.v >= 0) {
			return fmt.Errorf("sim profile %q: %s is %g: it must be zero or positive", p.Name, f.name, f.v)
		}
	}
	if p.DecodeBaseSeconds == 0 && p.DecodeSecondsPerKVToken == 0 {
		return fmt.Errorf("sim profile %q: decode_base_seconds and decode_seconds_per_kv_token are both 0: decoding would take no time; set one", p.Name)
	}
	if p.HostCacheTokens > 0 && p.HostBandwidthBytesPerSecond == 0 {
		return fmt.Errorf("sim profile %q: host_cache_tokens is %d but host_bandwidth_bytes_per_second is 0: give the host-to-GPU copy rate (PCIe 5 x16 is about 5e10)", p.Name, p.HostCacheTokens)
	}
	if err := p.Terms.validate(p.Name); err != nil {
		return err
	}
	if blocks := p.KVCapacityTokens / p.BlockSize; blocks*p.BlockSize < p.MaxModelLen {
		return fmt.Errorf("sim profile %q: kv_capacity_tokens %d holds %d whole blocks of %d, fewer than one max_model_len (%d) sequence: raise kv_capacity_tokens or lower max_model_len",
			p.Name, p.KVCapacityTokens, blocks, p.BlockSize, p.MaxModelLen)
	}
	return nil
}

// Options configures a simulator.
type Options struct {
	Profile Profile
	// Personality is the engine the simulator behaves like: "vllm" (the
	// default when empty) or "sglang". It picks the scheduler's policy and
	// the metric names, labels and buckets /metrics exposes.
	Personality string
	// Scale is modelled seconds per wall second (1 is real time; the default
	// demo uses about 60).
	Scale float64
	// Seed makes response ids, the generated words and tool-call arguments
	// reproducible.
	Seed uint64
	// FlushInterval is the wall time a stream waits after each write so that
	// the tokens of several iterations go out in one write; 0 picks 1 ms,
	// a negative value writes after every iteration. The first token is never
	// delayed, and metrics do not depend on it.
	FlushInterval time.Duration
	// Faults are injected from the start; their windows count from the
	// simulator's creation. They can be replaced at run time through
	// POST /admin/faults (see Faults).
	Faults Faults
	// Clock, when set, is the clock the engine runs on instead of one made
	// from Scale: the run's own clock, so a virtual-clock run models the
	// engine in the same modelled time as the load.
	Clock *timescale.Clock
	// Net, when set, is where Start serves instead of a TCP listener: the
	// in-memory network of a virtual-clock run (Start's address is then
	// ignored and the URL is a memnet one).
	Net *memnet.Net
}

// Sim is one simulated engine and its HTTP gateway.
type Sim struct {
	prof    Profile // as configured; faults may serve another (see life.prof)
	pers    personality
	seed    uint64
	flush   time.Duration
	clock   *timescale.Clock
	handler http.Handler
	words   []string // the answer vocabulary, each word ending in a space
	scans   *scanCache

	life   atomic.Pointer[life]       // the engine's current life; replaced after a crash
	faults atomic.Pointer[faultState] // the faults in force
	nextID atomic.Uint64
	chats  atomic.Uint64 // chat requests seen, for deterministic refusals

	down      atomic.Bool   // crashed: connections are refused until the restart
	downUntil atomic.Int64  // modelled time (ns) the crashed engine comes back
	crashReq  chan struct{} // buffered 1: a crash was asked for (the timers of crash faults)
	faultMu   sync.Mutex    // serialises fault changes
	faultStop context.CancelFunc

	stopped *timescale.Signal // latched when Run returns
	runOnce sync.Once
	net     *memnet.Net

	// beforeSubmit, when set (a decode engine of a prefill/decode split),
	// runs between a chat request's checks and its submission to the engine.
	beforeSubmit func(ctx context.Context, r *request) error
	// handlerWrites makes a stream's handler write every token even on a
	// virtual clock, as it does on a wall clock (tests compare the two).
	handlerWrites bool

	closeCtx    context.Context
	closeCancel context.CancelFunc

	srvMu sync.Mutex
	srv   *http.Server      // nil while crashed
	addr  string            // the address Start listens on, kept for restarts
	done  *timescale.Signal // latched when Run returns (Start only)

	serving atomic.Int64 // HTTP handlers running on the TCP server
}

// life is one run of the engine, from start to crash or stop: its own queue,
// KV cache and metrics registry, so a restart begins with counters at zero.
type life struct {
	prof Profile // the profile this life serves (faults may change model and context)
	met  *metrics
	born time.Duration // modelled time the life began; no request arrives earlier

	mu       sync.Mutex
	incoming []*request
	aborts   []*request
	wake     *timescale.Signal

	up       atomic.Bool       // accepting requests
	inflight atomic.Int64      // requests submitted and not yet done
	stopped  *timescale.Signal // latched when this life's engine stops
	kill     *timescale.Signal // latched to crash it
}

func (s *Sim) newLife(p Profile) *life {
	m := s.pers.metrics(p)
	if p.HostCacheTokens > 0 {
		m.reg.MustRegister(m.hostHits)
	}
	return &life{
		born:    s.clock.Now(),
		prof:    p,
		met:     m,
		wake:    s.clock.NewSignal(),
		stopped: s.clock.NewLatch(),
		kill:    s.clock.NewLatch(),
	}
}

func (l *life) crash() { l.kill.Close() }

// New validates the options and builds a simulator. Nothing runs until Start
// or Run.
func New(opts Options) (*Sim, error) {
	if err := opts.Profile.Validate(); err != nil {
		return nil, err
	}
	pers, err := personalityByName(opts.Personality)
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		c, err := timescale.New(opts.Scale)
		if err != nil {
			return nil, fmt.Errorf("sim options: scale: %w", err)
		}
		clock = c
	}
	flush := opts.FlushInterval
	if flush == 0 {
		flush = time.Millisecond
	}
	if flush < 0 || clock.Virtual() {
		flush = 0 // on a virtual clock every iteration's tokens go out at once
	}
	s := &Sim{
		prof:     opts.Profile,
		pers:     pers,
		seed:     opts.Seed,
		flush:    flush,
		clock:    clock,
		stopped:  clock.NewLatch(),
		net:      opts.Net,
		crashReq: make(chan struct{}, 1),
		words:    answerWords(opts.Seed),
		scans:    newScanCache(scanCacheBytes),
	}
	s.closeCtx, s.closeCancel = clock.WithCancel(context.Background())
	fs, err := s.newFaultState(opts.Faults, 0)
	if err != nil {
		return nil, fmt.Errorf("sim options: %w", err)
	}
	s.faults.Store(fs)
	s.life.Store(s.newLife(fs.profile))
	s.armFaults(fs, nil)
	s.handler = s.routes()
	if s.net != nil {
		s.handler = preparing{Handler: s.handler, s: s}
	}
	return s, nil
}

// Profile is the profile the simulator was built with.
func (s *Sim) Profile() Profile { return s.prof }

// Handler serves the OpenAI-compatible API, /health, /tokenize, /metrics and
// the loopback-only /admin/faults. Someone mounting it without Start must
// also call Run, or chat requests are refused with 503.
func (s *Sim) Handler() http.Handler { return s.handler }

// Run runs the engine until ctx is done or Close is called, for callers that
// mount Handler themselves. A crash fault stops the engine and Run starts a
// fresh one (new queue, KV cache and metrics) when the crash window ends. A
// simulator's engine runs at most once; a second call returns an error at once.
func (s *Sim) Run(ctx context.Context) error {
	started := false
	s.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("sim: the engine already ran; make a new Sim to run another")
	}
	defer s.stopped.Close()
	ctx, cancel := s.clock.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closeCtx, cancel)
	defer stop()
	for {
		l := s.life.Load()
		l.up.Store(true)
		crashed := newEngine(s, l).run(ctx)
		l.up.Store(false)
		l.stopped.Close()
		if !crashed {
			return nil
		}
		// Down: connections are refused until the crash window ends.
		until := time.Duration(s.downUntil.Load())
		if err := s.clock.SleepUntil(ctx, until); err != nil {
			return nil
		}
		s.life.Store(s.newLife(s.faults.Load().profile))
		s.life.Load().up.Store(true)
		s.reopen()
		s.down.Store(false)
	}
}

// Start runs the engine and serves HTTP on addr (such as "127.0.0.1:0") and
// returns the base URL, such as "http://127.0.0.1:40123".
func (s *Sim) Start(addr string) (string, error) {
	if s.net != nil {
		return s.startMem()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sim: listen on %s: %w; pick a free address such as 127.0.0.1:0", addr, err)
	}
	s.srvMu.Lock()
	if s.done != nil {
		s.srvMu.Unlock()
		ln.Close()
		return "", errors.New("sim: already started; make a new Sim to serve again")
	}
	s.addr = ln.Addr().String()
	s.srv = countingServer(s.handler, &s.serving)
	s.done = s.clock.NewLatch()
	srv, done := s.srv, s.done
	s.srvMu.Unlock()

	s.life.Load().up.Store(true) // accept requests before the engine goroutine is scheduled
	go func() {
		defer done.Close()
		_ = s.Run(s.closeCtx)
	}()
	go func() { _ = srv.Serve(ln) }()
	return "http://" + s.addr, nil
}

// startMem serves on the in-memory network: the engine runs on the clock.
func (s *Sim) startMem() (string, error) {
	s.srvMu.Lock()
	if s.done != nil {
		s.srvMu.Unlock()
		return "", errors.New("sim: already started; make a new Sim to serve again")
	}
	s.addr = s.net.Serve(s.handler)
	s.done = s.clock.NewLatch()
	done := s.done
	s.srvMu.Unlock()
	s.life.Load().up.Store(true)
	s.clock.Go(func() {
		defer done.Close()
		_ = s.Run(s.closeCtx)
	})
	return s.addr, nil
}

// reopen listens again on the address Start used, after a crash.
func (s *Sim) reopen() {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.net != nil {
		if s.closeCtx.Err() == nil {
			s.net.Replace(s.addr, s.handler)
		}
		return
	}
	if s.addr == "" || s.srv != nil || s.closeCtx.Err() != nil {
		return
	}
	var ln net.Listener
	var err error
	for range 100 { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return // stays down; Close still works
	}
	s.srv = countingServer(s.handler, &s.serving)
	go func(srv *http.Server) { _ = srv.Serve(ln) }(s.srv)
}

// crash kills the engine now and keeps it down until the modelled time
// until: open streams are cut, and with Start the listener closes so
// connections are refused.
func (s *Sim) crash(until time.Duration) {
	s.downUntil.Store(int64(until))
	s.down.Store(true)
	s.life.Load().crash()
	s.srvMu.Lock()
	if s.net != nil && s.addr != "" {
		s.net.Replace(s.addr, nil)
	}
	srv := s.srv
	s.srv = nil
	s.srvMu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Close stops the engine and the server. Open streams end promptly.
func (s *Sim) Close() error {
	s.closeCancel()
	s.stopFaults()
	s.srvMu.Lock()
	done := s.done
	s.srvMu.Unlock()
	if done == nil {
		return nil
	}
	// The engine is down, so every stream handler returns.
	_, _ = s.clock.WaitFor(context.Background(), "sim close", -1, done)
	s.srvMu.Lock()
	srv := s.srv
	s.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	return shutdown(srv, &s.serving, "sim: shutting down the server")
}

// submit queues a request for the engine and wakes it.
func (s *Sim) submit(l *life, r *request) error {
	if !l.up.Load() {
		return errEngineDown
	}
	r.life = l
	l.inflight.Add(1)
	l.mu.Lock()
	r.arrival = s.clock.Now() // under the lock, so the queue is in arrival order
	l.incoming = append(l.incoming, r)
	l.mu.Unlock()
	l.poke()
	return nil
}

// abort asks the engine to drop a request whose client went away, unless a
// fault keeps the engine from hearing of it.
func (s *Sim) abort(r *request) {
	if s.faults.Load().f.IgnoreDisconnects {
		return
	}
	if r.aborted.Swap(true) {
		return
	}
	l := r.life
	l.mu.Lock()
	l.aborts = append(l.aborts, r)
	l.mu.Unlock()
	l.poke()
}

func (l *life) poke() { l.wake.Poke() }

var errEngineDown = errors.New("the simulated engine is not running")
