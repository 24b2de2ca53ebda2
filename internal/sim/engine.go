package sim

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// request is one chat completion inside the engine. The fields above the line
// are set before submit and read-only after; the atomics are how the engine
// hands progress to the HTTP handler; the rest belongs to the engine goroutine.
type request struct {
	id        uint64
	prompt    int      // prompt tokens
	maxTokens int      // tokens to generate
	hashes    []uint64 // full prompt blocks
	arrival   time.Duration
	notify    chan struct{} // buffered 1; poked when produced grows
	// ---
	produced atomic.Int64 // tokens generated so far
	cached   atomic.Int64 // prompt tokens served from the prefix cache at first scheduling
	aborted  atomic.Bool  // the client went away

	computed    int     // tokens whose KV is computed in the current residency
	generated   int     // tokens sampled
	registered  int     // prompt blocks of this residency already offered to the cache
	blocks      []int32 // KV blocks held, in token order
	chain       []int32 // cached prompt blocks found by the last prefix lookup while waiting
	scheduled   bool    // scheduled at least once
	done        bool
	scheduledAt time.Duration
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
	p       Profile
	kv      *blockPool
	running []*request // in the order they started; the last is preempted first
	waiting []*request // FCFS; preempted requests go back to the front
	batch   []scheduledWork
	end     time.Duration // modelled end of the last iteration
	lagMax  float64
}

func newEngine(s *Sim) *engine {
	return &engine{s: s, p: s.prof, kv: newBlockPool(s.prof.KVCapacityTokens / s.prof.BlockSize)}
}

// run loops over iterations until ctx is done. Iteration k starts at the end
// of iteration k-1 when there is work, or at the arrival of the first request
// after an idle spell; it waits for wall time to reach its modelled end and
// only then hands out its tokens. When the host falls behind, the modelled
// clock keeps its own pace (so metrics stay exact) and the lag is reported.
func (e *engine) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer e.shutdown()
	for {
		e.drain()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			e.publish()
			e.s.met.lag.Set(0)
			select {
			case <-ctx.Done():
				return
			case <-e.s.wake:
				continue
			}
		}
		start := e.end
		if len(e.running) == 0 && e.waiting[0].arrival > start {
			start = e.waiting[0].arrival
		}
		cost := e.schedule(start)
		if len(e.batch) == 0 {
			// Everything runnable was preempted this step; vLLM admits again
			// on the next one.
			e.end = start
			continue
		}
		end := start + cost
		if d := time.Until(e.s.clock.Wall(end)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		e.apply(end)
		e.end = end
		lag := (e.s.clock.Now() - end).Seconds()
		if lag < 0 {
			lag = 0
		}
		e.s.met.lag.Set(lag)
		if lag > e.lagMax {
			e.lagMax = lag
			e.s.met.lagMax.Set(lag)
		}
		e.s.met.iterations.Inc()
		e.publish()
	}
}

// drain takes newly arrived requests and aborts from the handlers.
func (e *engine) drain() {
	e.s.mu.Lock()
	in, ab := e.s.incoming, e.s.aborts
	e.s.incoming, e.s.aborts = nil, nil
	e.s.mu.Unlock()
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
		e.s.met.success[finishAbort].Inc()
	}
}

// shutdown drops everything when the engine stops.
func (e *engine) shutdown() {
	e.running, e.waiting = nil, nil
	e.s.met.running.Set(0)
	e.s.met.waiting.Set(0)
}

func (e *engine) publish() {
	e.s.met.running.Set(float64(len(e.running)))
	e.s.met.waiting.Set(float64(len(e.waiting)))
	e.s.met.kvUsage.Set(e.kv.usage())
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
// reading the pool's arrays before the hash map is asked for more.
func (e *engine) prefixHits(r *request, max int) int {
	valid := 0
	for valid < len(r.chain) && valid < max {
		b := r.chain[valid]
		if !e.kv.hashed[b] || e.kv.hash[b] != r.hashes[valid] {
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
	e.s.met.preemptions.Inc()
	return v
}

// schedule plans the iteration starting at start into e.batch and returns its
// modelled cost: running requests first (a decode token each, or their next
// prefill chunk), then waiting requests in FCFS order while the token budget,
// the sequence cap and the KV cache allow.
func (e *engine) schedule(start time.Duration) time.Duration {
	e.batch = e.batch[:0]
	budget := e.p.MaxBatchedTokens
	preempted := false
	var decodeContext, prefillTokens int
	var attention float64

	add := func(r *request, n int) {
		decode := r.generated > 0 && r.pending() == 1
		e.batch = append(e.batch, scheduledWork{r: r, tokens: n, decode: decode})
		budget -= n
		if decode {
			decodeContext += r.computed + 1
		} else {
			prefillTokens += n
			attention += float64(n) * (float64(r.computed) + float64(n)/2)
		}
	}

	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n := min(r.pending(), budget)
		for !e.grow(r, r.computed+n) {
			preempted = true
			if e.preemptLast() == r {
				break
			}
		}
		if i >= len(e.running) || e.running[i] != r {
			break // r itself was preempted; it was the last running request
		}
		add(r, n)
		i++
	}

	for !preempted && len(e.waiting) > 0 && len(e.running) < e.p.MaxNumSeqs && budget > 0 {
		r := e.waiting[0]
		if r.arrival > start {
			break
		}
		target := r.prompt + r.generated
		// Prefix cache: the longest chain of cached full prompt blocks,
		// leaving at least one token to compute.
		hits := e.prefixHits(r, min(len(r.hashes), (target-1)/e.p.BlockSize))
		taken := 0 // cached blocks nobody holds, which cost an available block
		for _, b := range r.chain[:hits] {
			if e.kv.evictable(b) {
				taken++
			}
		}
		computed := hits * e.p.BlockSize
		n := min(target-computed, budget)
		if e.blocksFor(computed+n)-hits > e.kv.available()-taken {
			break // wait for blocks, head of line, as vLLM does
		}
		for _, b := range r.chain[:hits] {
			e.kv.touch(b)
			r.blocks = append(r.blocks, b)
		}
		r.chain = r.chain[:0]
		r.computed = computed
		r.registered = hits
		e.grow(r, computed+n)
		e.s.met.prefixQueries.Add(float64(target))
		e.s.met.prefixHits.Add(float64(computed))
		if !r.scheduled {
			r.scheduled = true
			r.scheduledAt = start
			r.cached.Store(int64(computed))
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, r)
		add(r, n)
	}

	cost := e.p.DecodeBaseSeconds +
		e.p.DecodeSecondsPerKVToken*float64(decodeContext) +
		float64(prefillTokens)/e.p.PrefillTokensPerSecond +
		e.p.PrefillAttentionSecondsPerKVToken*attention
	e.s.met.iterationTokens.Observe(float64(e.p.MaxBatchedTokens - budget))
	return time.Duration(cost * float64(time.Second))
}

// apply lands the planned iteration at its modelled end: KV progress, newly
// full prompt blocks into the prefix cache, sampled tokens to the handlers,
// and finished requests out of the batch.
func (e *engine) apply(end time.Duration) {
	m := e.s.met
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
			r.firstAt = end
			m.ttft.Observe((end - r.arrival).Seconds())
			m.promptTokens.Add(float64(r.prompt))
		} else {
			m.itl.Observe((end - r.lastAt).Seconds())
		}
		r.lastAt = end
		if r.generated >= r.maxTokens {
			e.finish(r)
			finished = true
		}
		r.produced.Store(int64(r.generated))
		select {
		case r.notify <- struct{}{}:
		default:
		}
	}
	m.generationTokens.Add(float64(generated))
	if finished {
		e.running = slices.DeleteFunc(e.running, func(r *request) bool { return r.done })
	}
}

// finish records a request that generated all its tokens and frees its blocks.
func (e *engine) finish(r *request) {
	m := e.s.met
	r.done = true
	e.free(r)
	decode := r.lastAt - r.firstAt
	m.success[finishLength].Inc()
	m.e2e.Observe((r.lastAt - r.arrival).Seconds())
	m.queue.Observe((r.scheduledAt - r.arrival).Seconds())
	m.prefill.Observe((r.firstAt - r.scheduledAt).Seconds())
	m.decode.Observe(decode.Seconds())
	m.inference.Observe((r.lastAt - r.scheduledAt).Seconds())
	m.promptHist.Observe(float64(r.prompt))
	m.generationHist.Observe(float64(r.generated))
	m.maxTokensReq.Observe(float64(r.maxTokens))
	tpot := 0.0
	if r.generated > 1 {
		tpot = decode.Seconds() / float64(r.generated-1)
	}
	m.tpot.Observe(tpot)
}
