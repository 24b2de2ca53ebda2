package calibrate

import (
	"math"

	"github.com/headroom-bench/headroom/internal/sim"
)

// Shifted is the fitted profile with every fitted timing field moved z
// standard errors towards a slower engine (z < 0: a faster one), each
// kept at zero or above: a prediction run on Shifted(-1.96) and
// Shifted(1.96) as well as on the fit carries the fit's own uncertainty.
func (f Fit) Shifted(z float64) sim.Profile {
	p := f.Profile
	for _, q := range f.Params {
		if q.Status != Fitted || !(q.SE > 0) {
			continue
		}
		d := z * q.SE
		switch q.Field {
		case "prefill_tokens_per_second":
			p.PrefillTokensPerSecond = math.Max(q.Value*0.01, q.Value-d) // a slower engine has a lower rate
		case "prefill_attention_seconds_per_kv_token":
			p.PrefillAttentionSecondsPerKVToken = math.Max(0, q.Value+d)
		case "decode_base_seconds":
			p.DecodeBaseSeconds = math.Max(0, q.Value+d)
		case "decode_seconds_per_kv_token":
			p.DecodeSecondsPerKVToken = math.Max(0, q.Value+d)
		case "request_seconds":
			p.RequestSeconds = math.Max(0, q.Value+d)
		case "request_seconds_per_prompt_token":
			p.RequestSecondsPerPromptToken = math.Max(0, q.Value+d)
		}
	}
	if p.DecodeBaseSeconds == 0 && p.DecodeSecondsPerKVToken == 0 {
		p.DecodeBaseSeconds = f.Profile.DecodeBaseSeconds
	}
	return p
}
