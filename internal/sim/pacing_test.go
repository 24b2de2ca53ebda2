package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestPacingOnVirtualClock runs the engine on synctest's fake clock: wall time
// taken must be the modelled cost divided by the scale, with no lag.
func TestPacingOnVirtualClock(t *testing.T) {
	tests := []struct {
		name      string
		scale     float64
		prompt    int
		maxTokens int
	}{
		// Real time: one chunk of prefill then decodes.
		{"real time", 1, 100, 5},
		// Scale 60, three chunks of prefill then decodes.
		{"scale 60", 60, 600, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := tinyProfile()
				s, err := New(Options{Profile: p, Scale: tc.scale})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan struct{})
				go func() { _ = s.Run(ctx); close(ran) }()
				synctest.Wait()

				r := &request{id: 1, prompt: tc.prompt, maxTokens: tc.maxTokens, notify: s.clock.NewSignal()}
				wall := time.Now()
				if err := s.submit(s.life.Load(), r); err != nil {
					t.Fatal(err)
				}
				for have := 0; have < tc.maxTokens; {
					if have, err = s.waitTokens(ctx, r, have); err != nil {
						t.Fatal(err)
					}
				}
				took := time.Since(wall)

				// Modelled cost: prefill chunks of at most 256 tokens, then one
				// decode step per further token over the growing context.
				var modelled float64
				for done := 0; done < tc.prompt; done += p.MaxBatchedTokens {
					n := min(p.MaxBatchedTokens, tc.prompt-done)
					modelled += p.DecodeBaseSeconds + float64(n)/p.PrefillTokensPerSecond
				}
				for k := 1; k < tc.maxTokens; k++ {
					modelled += p.DecodeBaseSeconds + p.DecodeSecondsPerKVToken*float64(tc.prompt+k)
				}
				want := time.Duration(modelled / tc.scale * float64(time.Second))
				if diff := took - want; diff < -time.Microsecond || diff > time.Microsecond {
					t.Errorf("wall time %v, want modelled %.6fs / scale %g = %v", took, modelled, tc.scale, want)
				}
				var lag dto.Metric
				if err := s.life.Load().met.lagMax.Write(&lag); err != nil {
					t.Fatal(err)
				}
				if got := lag.GetGauge().GetValue(); got > 1e-6 {
					t.Errorf("engine lagged %gs behind a virtual clock that never runs late", got)
				}
				cancel()
				<-ran
				if !s.stopped.IsSet() {
					t.Error("Run returned without marking the engine stopped")
				}
			})
		})
	}
}
