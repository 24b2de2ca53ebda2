package sim

import "time"

// SGLang's new-token-ratio defaults (SGLANG_INIT_NEW_TOKEN_RATIO,
// SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS,
// SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION).
const (
	sglangInitRatio     = 0.7
	sglangMinRatio      = sglangInitRatio * 0.14
	sglangRatioDecay    = (sglangInitRatio - sglangMinRatio) / 600
	sglangClipNewTokens = 4096
)

// scheduleSGLang plans an SGLang iteration: a prefill ("extend") batch when
// a chunked prefill is under way or a queued request can be admitted, else a
// decode batch of every running request. Batches are not mixed (SGLang's
// default without --enable-mixed-chunk), so decodes pause while a prefill
// runs. Admission keeps KV free for the running requests' future tokens,
// estimated as new_token_ratio x their remaining max_tokens.
func (e *engine) scheduleSGLang(start time.Duration) {
	// A chunked prefill under way continues first.
	for i := 0; i < len(e.running) && e.plan.budget > 0; i++ {
		r := e.running[i]
		if r.readyAt > start {
			continue // in its wait (Terms.RequestSeconds)
		}
		if r.pending() > 1 || r.generated == 0 {
			if !e.continueRunning(i, min(r.pending(), e.plan.budget)) {
				break
			}
		}
	}
	if !e.plan.preempted {
		reserve := 0.0
		for _, r := range e.running {
			reserve += e.ratio * float64(min(r.maxTokens-r.generated, sglangClipNewTokens))
		}
		for len(e.waiting) > 0 {
			r := e.waiting[0]
			own := e.ratio * float64(min(r.maxTokens-r.generated, sglangClipNewTokens))
			if !e.admit(start, e.blocksFor(int(reserve+own))) {
				break
			}
			reserve += own
		}
	}
	if len(e.batch) > 0 || e.plan.preempted {
		return
	}
	// A decode batch: one token for every running request; a KV shortage
	// retracts requests and raises the ratio back to its start.
	for i := 0; i < len(e.running); i++ {
		if e.running[i].readyAt > start {
			continue // in its wait (Terms.RequestSeconds)
		}
		if !e.continueRunning(i, 1) {
			break
		}
	}
	if e.plan.preempted {
		e.ratio = sglangInitRatio
	} else {
		e.ratio = max(sglangMinRatio, e.ratio-sglangRatioDecay)
	}
}
