package sim

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestGatewayWriterScansMatchBytes checks the gateway writer's scans
// against the bytes calls they replace, on random writes built from the
// pieces they look for (whole, cut, overlapping, doubled quotes): the
// finish_reason count is bytes.Count's, the [DONE] test bytes.Contains',
// and the kept end of the answer the last 4096 bytes of all written, as the
// bytes.Buffer cut after every write kept it.
func TestGatewayWriterScansMatchBytes(t *testing.T) {
	pieces := []string{
		`"finish_reason"`, `finish_reason`, `"finish_reason"finish_reason"`, `""finish_reason""`, `"`, `finish_reaso`, `inish_reason"`,
		"data: [DONE]", "data: [DONE", "DONE]", "data: [", "ata: [DONE]", "data: [data: [DONE]]", "d", "x",
		`data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"so "},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var kept bytes.Buffer
	g := &gatewayWriter{}
	total := 0
	for i := range 20000 {
		var b []byte
		n := rng.IntN(6)
		if rng.IntN(500) == 0 {
			n = 400 // a write longer than the kept end
		}
		for range n {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		if got, want := countFinish(b), bytes.Count(b, finishMember); got != want {
			t.Fatalf("write %d %q: countFinish %d, bytes.Count %d", i, b, got, want)
		}
		if got, want := hasDone(b), bytes.Contains(b, doneLine); got != want {
			t.Fatalf("write %d %q: hasDone %v, bytes.Contains %v", i, b, got, want)
		}
		kept.Write(b)
		if n := kept.Len(); n > 4096 {
			kept.Next(n - 4096)
		}
		g.keep(b)
		total += len(b)
		if !bytes.Equal(g.end(), kept.Bytes()) {
			t.Fatalf("write %d (%d bytes in all): the kept end differs from the last 4096 bytes", i, total)
		}
	}
	if total < 8*tailBytes {
		t.Fatalf("only %d bytes written: the kept end was never cut", total)
	}
}
