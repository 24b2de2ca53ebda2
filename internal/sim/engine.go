package sim

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/timescale"
)

// request is one chat completion inside the engine. The fields above the line
// are set before submit and read-only after; the atomics are how the engine
// hands progress to the HTTP handler; the rest belongs to the engine goroutine.
type request struct {
	id        uint64
	prompt    int      // prompt tokens
	maxTokens int      // tokens to generate
	maxParam  int      // the max_tokens the request allowed (maxTokens may be fewer)
	finish    string   // the API finish reason once maxTokens are generated
	reply     *reply   // what the tokens say
	hashes    []uint64 // full prompt blocks
	arrival   time.Duration
	notify    *timescale.Signal // poked when produced grows (see engine.hand)
	quiet     bool              // the handler needs waking only at the last token
	life      *life             // the engine life it was submitted to
	// kvReady says the prompt's KV arrived from a prefill engine: at first
	// admission only the last prompt token is computed here.
	kvReady bool
	// ---
	malformed bool         // the malformed-tool-calls fault struck; set before the first token is published
	produced  atomic.Int64 // tokens generated so far
	cached    atomic.Int64 // prompt tokens served from this engine's caches at first scheduling
	aborted   atomic.Bool  // the client went away
	// seed is the earlier turn's request, whose KV blocks are where the
	// prefix lookup looks first (set before submit; the engine drops it).
	seed *request
	// direct is the stream the engine writes the tokens into itself, on a
	// virtual clock; set by the handler before it first waits.
	direct *streamWriter

	external    int     // prompt tokens whose KV came from a prefill engine, at first scheduling
	computed    int     // tokens whose KV is computed in the current residency
	generated   int     // tokens sampled
	registered  int     // prompt blocks of this residency already offered to the cache
	blocks      []int32 // KV blocks held, in token order
	chain       []int32 // cached prompt blocks found by the last prefix lookup while waiting; once done, the prompt blocks it held
	scheduled   bool    // scheduled at least once
	done        bool
	preemptions int // times preempted (SGLang: retracted)
	scheduledAt time.Duration
	readyAt     time.Duration // with Terms.RequestSeconds: when its wait after admission ends
	firstAt     time.Duration
	lastAt      time.Duration
}

// pending is how many tokens the request must compute before it samples its
// next token: the rest of the prompt (plus, after a preemption, the tokens it
// had generated), or 1 when decoding.
func (r *request) pending() int { return r.prompt + r.generated - r.computed }

// scheduledWork is one request's share of an iteration.
type scheduledWork struct {
	r      *request
	tokens int
	decode bool
}

// engine is the iteration loop. Only its goroutine touches its fields.
type engine struct {
	s       *Sim
	l       *life
	met     *metrics
	p       Profile
	kv      *blockPool
	running []*request // in the order they started; the last is preempted first
	waiting []*request // FCFS; preempted requests go back to the front
	batch   []scheduledWork
	end     time.Duration // modelled end of the last iteration
	lagMax  float64
	// preempted says the last schedule preempted a request (so an empty
	// batch is worth retrying at once).
	preempted bool
	plan      iterationPlan
	ratio     float64 // SGLang's new_token_ratio
}

func newEngine(s *Sim, l *life) *engine {
	e := &engine{s: s, l: l, met: l.met, p: l.prof, kv: newBlockPool(l.prof.KVCapacityTokens / l.prof.BlockSize), end: l.born, ratio: sglangInitRatio}
	if n := l.prof.HostCacheTokens / l.prof.BlockSize; n > 0 {
		e.kv.host = newHostCache(n)
	}
	return e
}

// run loops over iterations until ctx is done (returning false) or the life
// is killed by a crash fault (returning true). Iteration k starts at the end
// of iteration k-1 when there is work, or at the arrival of the first request
// after an idle spell; it waits for wall time to reach its modelled end and
// only then hands out its tokens. When the host falls behind, the modelled
// clock keeps its own pace (so metrics stay exact) and the lag is reported.
func (e *engine) run(ctx context.Context) (crashed bool) {
	defer e.shutdown()
	clock := e.s.clock
	// sleep waits for the clock to reach modelled time at, or for a poke
	// when wakeable; it reports whether the engine must stop.
	sleep := func(at time.Duration, wakeable bool) (stop, crash bool) {
		var i int
		var err error
		if wakeable {
			i, err = clock.WaitFor(ctx, "engine iteration", at, e.l.kill, e.l.wake)
		} else {
			i, err = clock.WaitFor(ctx, "engine iteration", at, e.l.kill)
		}
		if err != nil {
			return true, false
		}
		return i == 0, i == 0
	}
	// idle waits for a poke; it reports whether the engine must stop.
	idle := func() (stop, crash bool) {
		i, err := clock.WaitFor(ctx, "engine idle", -1, e.l.kill, e.l.wake)
		if err != nil {
			return true, false
		}
		return i == 0, i == 0
	}
	for {
		e.drain()
		e.pin()
		fs := e.s.faults.Load()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			e.ratio = sglangInitRatio // SGLang resets new_token_ratio when idle
			e.publish()
			e.met.lag.Set(0)
			if stop, crash := idle(); stop {
				return crash
			}
			continue
		}
		start := e.end
		if len(e.running) == 0 && e.waiting[0].arrival > start {
			start = e.waiting[0].arrival
		}
		if fs.stalled(start) {
			// A stall: no iteration runs until it ends (a poke re-reads the
			// faults, which may have been cleared).
			if stop, crash := sleep(fs.stallEnd, true); stop {
				return crash
			}
			if now := e.s.clock.Now(); now > e.end {
				e.end = min(now, fs.stallEnd)
			}
			continue
		}
		cost := e.schedule(start)
		if len(e.batch) == 0 {
			e.end = start
			if e.preempted {
				// Everything runnable was preempted this step; vLLM admits
				// again on the next one.
				continue
			}
			if at, ok := e.nextReady(start); ok {
				// Every running request is in its wait (Terms): sleep to the
				// first one's end, or until a request arrives.
				if stop, crash := sleep(at, true); stop {
					return crash
				}
				e.end = max(e.end, min(e.s.clock.Now(), at))
				continue
			}
			// Nothing fits (a fault shrank the KV cache): wait for a change.
			e.publish()
			if stop, crash := idle(); stop {
				return crash
			}
			if now := e.s.clock.Now(); now > e.end {
				e.end = now
			}
			continue
		}
		end := start + cost
		if stop, crash := sleep(end, false); stop {
			return crash
		}
		e.apply(end, fs)
		e.end = end
		lag := (e.s.clock.Now() - end).Seconds()
		if lag < 0 {
			lag = 0
		}
		e.met.lag.Set(lag)
		if lag > e.lagMax {
			e.lagMax = lag
			e.met.lagMax.Set(lag)
		}
		e.met.iterations.Inc()
		e.publish()
	}
}

// pin holds KV blocks out of use while a fault shrinks the cache, taking
// them as they come free, and gives them back when the fault ends.
func (e *engine) pin() {
	want := 0
	if c := e.s.faults.Load().kvCapacity(e.end); c > 0 {
		want = max(0, e.kv.total()-c/e.p.BlockSize)
	}
	for len(e.kv.pinned) < want && e.kv.available() > 0 {
		e.kv.pinned = append(e.kv.pinned, e.kv.alloc())
	}
	for len(e.kv.pinned) > want {
		n := len(e.kv.pinned) - 1
		e.kv.release(e.kv.pinned[n])
		e.kv.pinned = e.kv.pinned[:n]
	}
}

// drain takes newly arrived requests and aborts from the handlers.
func (e *engine) drain() {
	e.l.mu.Lock()
	in, ab := e.l.incoming, e.l.aborts
	e.l.incoming, e.l.aborts = nil, nil
	e.l.mu.Unlock()
	e.waiting = append(e.waiting, in...)
	for _, r := range ab {
		if r.done {
			continue
		}
		if i := slices.Index(e.running, r); i >= 0 {
			e.running = slices.Delete(e.running, i, i+1)
		} else if i := slices.Index(e.waiting, r); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
		e.free(r)
		r.done = true
		e.l.inflight.Add(-1)
		e.met.success[finishAbort].Inc()
	}
}

// shutdown drops everything when the engine stops.
func (e *engine) shutdown() {
	e.running, e.waiting = nil, nil
	e.met.running.Set(0)
	e.met.waiting.Set(0)
}

func (e *engine) publish() {
	e.met.running.Set(float64(len(e.running)))
	e.met.waiting.Set(float64(len(e.waiting)))
	e.met.kvUsage.Set(e.kv.usage())
	e.met.usedTokens.Set(float64(e.kv.used * e.p.BlockSize))
	if e.met.queryTokens > 0 {
		e.met.cacheHitRate.Set(e.met.hitTokens / e.met.queryTokens)
	}
}

// blocksFor is the number of blocks that hold n tokens.
func (e *engine) blocksFor(n int) int { return (n + e.p.BlockSize - 1) / e.p.BlockSize }

// grow gives r enough blocks for n tokens, or reports false without taking any.
func (e *engine) grow(r *request, n int) bool {
	need := e.blocksFor(n) - len(r.blocks)
	if need <= 0 {
		return true
	}
	if need > e.kv.available() {
		return false
	}
	for range need {
		r.blocks = append(r.blocks, e.kv.alloc())
	}
	return true
}

// free returns r's blocks, last block first so a prompt's tail is evicted
// before its head.
func (e *engine) free(r *request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		e.kv.release(r.blocks[i])
	}
	r.blocks = r.blocks[:0]
	r.computed = 0
	r.registered = 0
}

// prefixHits is how many leading prompt blocks of r (at most max) are in the
// prefix cache, with the blocks in r.chain. A request that waits for KV is
// looked up every iteration, so the chain found last time is checked by
// reading the pool's arrays before the hash map is asked for more; a new
// turn starts from the blocks its conversation's earlier turn held, which
// mostly hold its prompt's start still. A block whose array entries hold the
// hash is the one the map holds for it (register and alloc keep them so),
// so the chain is the map's whatever the guess.
func (e *engine) prefixHits(r *request, max int) int {
	if e.p.NoPrefixCaching {
		return 0
	}
	if r.chain == nil {
		r.chain = make([]int32, 0, len(r.hashes)) // its longest: no growing per lookup
	}
	if s := r.seed; s != nil {
		r.seed = nil
		if len(r.chain) == 0 && s.life == r.life && s.done {
			r.chain = append(r.chain, s.chain...)
		}
	}
	valid := 0
	for valid < len(r.chain) && valid < max {
		b := r.chain[valid]
		if !e.kv.holds(b, r.hashes[valid]) {
			break
		}
		valid++
	}
	r.chain = r.chain[:valid]
	for len(r.chain) < max {
		b, ok := e.kv.lookup(r.hashes[len(r.chain)])
		if !ok {
			break
		}
		r.chain = append(r.chain, b)
	}
	return len(r.chain)
}

// preemptLast sends the most recently started running request back to the
// front of the queue, dropping its KV (recompute preemption).
func (e *engine) preemptLast() *request {
	v := e.running[len(e.running)-1]
	e.running = e.running[:len(e.running)-1]
	e.free(v)
	e.waiting = slices.Insert(e.waiting, 0, v)
	e.met.preemptions.Inc()
	v.preemptions++
	return v
}

// schedule plans the iteration starting at start into e.batch and returns its
// modelled cost: running requests first (a decode token each, or their next
// prefill chunk), then waiting requests in FCFS order while the token budget,
// the sequence cap and the KV cache allow.
func (e *engine) schedule(start time.Duration) time.Duration {
	e.batch = e.batch[:0]
	e.plan = iterationPlan{budget: e.p.MaxBatchedTokens}
	if e.s.pers.prefillFirst {
		e.scheduleSGLang(start)
	} else {
		e.scheduleVLLM(start)
	}
	e.preempted = e.plan.preempted
	pl := e.plan
	cost := e.p.DecodeBaseSeconds +
		e.p.DecodeSecondsPerKVToken*float64(pl.decodeContext) +
		float64(pl.prefillTokens)/e.p.PrefillTokensPerSecond +
		e.p.PrefillAttentionSecondsPerKVToken*pl.attention +
		pl.hostSeconds
	cost *= e.p.loadFactor(len(e.running))
	e.met.iterationTokens.Observe(float64(pl.decodeTokens + pl.prefillTokens))
	return time.Duration(cost * float64(time.Second))
}

// iterationPlan is what the iteration being planned holds so far.
type iterationPlan struct {
	budget        int // tokens left in the iteration's prefill budget
	preempted     bool
	decodeTokens  int
	decodeContext int     // tokens of context read by the decodes
	prefillTokens int     // prompt tokens computed
	attention     float64 // prefill token-pairs of attention
	hostSeconds   float64 // copying host-cache hits into GPU blocks
}

// add puts n tokens of r's work into the iteration.
func (e *engine) add(r *request, n int) {
	decode := r.generated > 0 && r.pending() == 1
	e.batch = append(e.batch, scheduledWork{r: r, tokens: n, decode: decode})
	pl := &e.plan
	if decode {
		pl.decodeTokens += n
		pl.decodeContext += r.computed + 1
		if !e.s.pers.prefillFirst {
			pl.budget -= n // vLLM's budget counts decode tokens; SGLang's chunk size does not
		}
		return
	}
	pl.budget -= n
	pl.prefillTokens += n
	pl.attention += float64(n) * (float64(r.computed) + float64(n)/2)
}

// continueRunning schedules running request r for n more tokens, preempting
// the most recently started requests while KV blocks are short. It reports
// false when r itself had to go.
func (e *engine) continueRunning(i, n int) bool {
	r := e.running[i]
	for !e.grow(r, r.computed+n) {
		e.plan.preempted = true
		if e.preemptLast() == r {
			break
		}
	}
	if i >= len(e.running) || e.running[i] != r {
		return false // r itself was preempted; it was the last running request
	}
	e.add(r, n)
	return true
}

// admit moves the head of the queue into the batch when the token budget,
// the sequence cap and the KV cache allow, keeping reserve blocks free. It
// reports whether it did.
func (e *engine) admit(start time.Duration, reserve int) bool {
	if len(e.waiting) == 0 || len(e.running) >= e.p.MaxNumSeqs || e.plan.budget <= 0 {
		return false
	}
	r := e.waiting[0]
	if r.arrival > start {
		return false
	}
	target := r.prompt + r.generated
	// Prefix cache: the longest chain of cached full prompt blocks, leaving
	// at least one token to compute.
	hits := e.prefixHits(r, min(len(r.hashes), (target-1)/e.p.BlockSize))
	taken := 0 // cached blocks nobody holds, which cost an available block
	for _, b := range r.chain[:hits] {
		if e.kv.evictable(b) {
			taken++
		}
	}
	// Host tier: the blocks after the GPU hits that host memory holds are
	// copied in (a transfer, not a recompute).
	hostHits := 0
	if e.kv.host != nil && !e.p.NoPrefixCaching {
		for limit := min(len(r.hashes), (target-1)/e.p.BlockSize); hits+hostHits < limit && e.kv.host.hit(r.hashes[hits+hostHits]); {
			hostHits++
		}
	}
	computed := (hits + hostHits) * e.p.BlockSize
	local := computed // prompt tokens this engine's caches served
	if r.kvReady && !r.scheduled {
		computed = max(computed, r.prompt-1)
	}
	n := min(target-computed, e.plan.budget)
	if e.blocksFor(computed+n)-hits+reserve > e.kv.available()-taken {
		return false // wait for blocks, head of line, as both engines do
	}
	if r.blocks == nil {
		// All the blocks it will hold if it runs to its end (within reason):
		// no growing per iteration.
		r.blocks = make([]int32, 0, e.blocksFor(r.prompt+min(r.maxTokens, 8192)))
	}
	for _, b := range r.chain[:hits] {
		e.kv.touch(b)
		r.blocks = append(r.blocks, b)
	}
	r.chain = r.chain[:0]
	if hostHits > 0 {
		tokens := hostHits * e.p.BlockSize
		e.plan.hostSeconds += float64(tokens) * e.p.kvBytesPerToken() / e.p.HostBandwidthBytesPerSecond
		e.met.hostHits.Add(float64(tokens))
	}
	r.computed = computed
	r.registered = hits
	e.grow(r, computed+n)
	e.met.queryTokens += float64(target) // SGLang's hit rate counts every prefill, retractions too
	e.met.hitTokens += float64(local)
	if !r.scheduled {
		// vLLM records a request's lookup (queries and hits together) when
		// it is admitted, and keeps the new lookups of a preempted request
		// apart, unexported: each request counts once.
		e.met.prefixQueries.Add(float64(target))
		e.met.prefixHits.Add(float64(local))
		r.scheduled = true
		r.scheduledAt = start
		r.cached.Store(int64(local))
		r.external = computed - local
		e.met.queueAtAdmit.Observe((start - r.arrival).Seconds())
		if d := e.p.requestDelay(target-computed, len(e.running)+1); d > 0 {
			r.readyAt = start + d
		}
	}
	e.waiting = e.waiting[1:]
	e.running = append(e.running, r)
	if r.readyAt <= start {
		e.add(r, n)
	}
	return true
}

// scheduleVLLM plans a vLLM v1 iteration: running requests first (a decode
// token each, or their next prefill chunk), then waiting requests in FCFS
// order, prefill and decode mixed in one batch under one token budget.
func (e *engine) scheduleVLLM(start time.Duration) {
	for i := 0; i < len(e.running) && e.plan.budget > 0; i++ {
		if e.running[i].readyAt > start {
			continue // in its wait (Terms.RequestSeconds)
		}
		if !e.continueRunning(i, min(e.running[i].pending(), e.plan.budget)) {
			break
		}
	}
	for !e.plan.preempted && e.admit(start, 0) {
	}
}

// apply lands the planned iteration at its modelled end: KV progress, newly
// full prompt blocks into the prefix cache, sampled tokens to the handlers,
// and finished requests out of the batch.
func (e *engine) apply(end time.Duration, fs *faultState) {
	m := e.met
	finished := false
	generated := 0
	for _, w := range e.batch {
		r := w.r
		if r.done || r.aborted.Load() {
			continue // dropped at the next drain
		}
		r.computed += w.tokens
		for r.registered < len(r.hashes) && (r.registered+1)*e.p.BlockSize <= r.computed {
			e.kv.register(r.blocks[r.registered], r.hashes[r.registered])
			r.registered++
		}
		if r.pending() > 0 {
			continue // mid-prefill
		}
		r.generated++
		generated++
		if r.generated == 1 {
			if n := fs.f.MalformedToolCallsAbove; n > 0 && r.reply != nil && r.reply.kind == replyTool && e.l.inflight.Load() > int64(n) {
				r.malformed = true // published with produced below
			}
			r.firstAt = end
			if e.p.TTFTFromAdmission {
				m.ttft.Observe((end - r.scheduledAt).Seconds())
			} else {
				m.ttft.Observe((end - r.arrival).Seconds())
			}
			// Prompt tokens and the cached ones together, at the first token,
			// as vLLM's output processor counts them.
			local, ext := int(r.cached.Load()), r.external
			m.promptTokens.Add(float64(r.prompt))
			m.promptCached.Add(float64(local + ext))
			m.promptBySource[sourceCompute].Add(float64(r.prompt - local - ext))
			m.promptBySource[sourceCacheHit].Add(float64(local))
			m.promptBySource[sourceExternal].Add(float64(ext))
		} else {
			m.itl.Observe((end - r.lastAt).Seconds())
		}
		r.lastAt = end
		if r.generated >= r.maxTokens {
			e.finish(r)
			finished = true
		}
		r.produced.Store(int64(r.generated))
		e.hand(r)
	}
	m.generationTokens.Add(float64(generated))
	if finished {
		e.running = slices.DeleteFunc(e.running, func(r *request) bool { return r.done })
	}
}

// finish records a request that generated all its tokens and frees its blocks.
func (e *engine) finish(r *request) {
	m := e.met
	r.done = true
	held := r.registered
	e.free(r)
	r.chain, r.blocks = r.blocks[:held], nil // a later turn's first guess (prefixHits)
	e.l.inflight.Add(-1)
	decode := r.lastAt - r.firstAt
	switch r.finish {
	case finishStop, finishToolCalls:
		m.success[finishStop].Inc()
	default:
		m.success[finishLength].Inc()
	}
	m.e2e.Observe((r.lastAt - r.arrival).Seconds())
	m.queue.Observe((r.scheduledAt - r.arrival).Seconds())
	m.prefill.Observe((r.firstAt - r.scheduledAt).Seconds())
	m.decode.Observe(decode.Seconds())
	m.inference.Observe((r.lastAt - r.scheduledAt).Seconds())
	m.promptHist.Observe(float64(r.prompt))
	m.generationHist.Observe(float64(r.generated))
	m.maxTokensReq.Observe(float64(r.maxParam))
	m.promptTokensDone.Add(float64(r.prompt))
	m.generationTokensDone.Add(float64(r.generated))
	m.cachedTokensDone.Add(float64(r.cached.Load()))
	m.retractions.Observe(float64(r.preemptions))
	tpot := 0.0
	if r.generated > 1 {
		tpot = decode.Seconds() / float64(r.generated-1)
	}
	m.tpot.Observe(tpot)
}
