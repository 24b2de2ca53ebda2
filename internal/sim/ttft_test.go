package sim

import (
	"fmt"
	"testing"
)

// TestAPITTFTHoldsEngineTTFT: headroom_sim_api_time_to_first_token_seconds
// starts when the handler does and ends when the first token's chunk is
// flushed, so for every streamed request it holds the engine's TTFT (arrival
// in the engine to the first token) plus reading the request and handing the
// token over; a plain request is not in it.
func TestAPITTFTHoldsEngineTTFT(t *testing.T) {
	_, url := startSim(t, tinyProfile(), 100)
	for i := range 4 {
		streamChat(t, url, "tiny-model", words(fmt.Sprintf("a%d-", i), 0, 500*(i+1)), 3)
	}
	fams := scrape(t, url)
	engineSum, engineN := hist(t, fams, "vllm:time_to_first_token_seconds")
	apiSum, apiN := hist(t, fams, "headroom_sim_api_time_to_first_token_seconds")
	if engineN != 4 || apiN != 4 {
		t.Fatalf("TTFT observations: engine %d, API %d; want 4 each", engineN, apiN)
	}
	if !(apiSum >= engineSum) {
		t.Errorf("API TTFT sum %.4fs is below the engine's %.4fs over the same requests", apiSum, engineSum)
	}
	t.Logf("TTFT sums over 4 requests: engine %.3fs, API %.3fs", engineSum, apiSum)
	resp := post(t, t.Context(), url+"/v1/chat/completions", chatJSON("tiny-model", words("plain", 0, 50), 2, false))
	resp.Body.Close()
	fams = scrape(t, url)
	if _, n := hist(t, fams, "vllm:time_to_first_token_seconds"); n != 5 {
		t.Errorf("engine TTFT observations after a plain request: %d, want 5", n)
	}
	if _, n := hist(t, fams, "headroom_sim_api_time_to_first_token_seconds"); n != 4 {
		t.Errorf("API TTFT observations after a plain request: %d, want 4 (streams only)", n)
	}
}
