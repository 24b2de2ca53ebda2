package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// session is one benchmark agent: a long context that grows each turn.
type session struct {
	text    []byte // all words the session will ever send
	offsets []int  // offsets[w] is the byte length of the first w words
}

func newSession(tag string, maxWords int) *session {
	s := &session{text: []byte(words(tag, 0, maxWords)), offsets: make([]int, maxWords+1)}
	w := 0
	for i, c := range s.text {
		if c == ' ' {
			w++
			s.offsets[w] = i
		}
	}
	s.offsets[maxWords] = len(s.text)
	return s
}

// body is a streaming chat request for the first n words, built without
// copying the prompt.
func (s *session) body(model string, n, maxTokens int) io.Reader {
	head := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"messages":[{"role":"user","content":"`, model, maxTokens)
	return io.MultiReader(bytes.NewReader([]byte(head)), bytes.NewReader(s.text[:s.offsets[n]]), bytes.NewReader([]byte(`"}]}`)))
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDemoLoad drives the default profile at scale 60 the way the
// default demo does: 20 concurrent agent sessions with 20K-200K-word contexts
// growing 1000 words a turn and 300-token answers, streamed over loopback. One
// op is one request. It reports the CPU cores used (server and this client
// together), tokens streamed per wall second, CPU per token, and the engine's
// worst lag behind wall time (modelled seconds).
func BenchmarkDemoLoad(b *testing.B) {
	loadBench(b, DefaultProfile(), 60, 20, 20_000, 200_000, 1000, 300)
}

// BenchmarkManyStreams stresses the per-token path: 64 concurrent streams of
// short prompts and 500-token answers on a fast profile at scale 200.
func BenchmarkManyStreams(b *testing.B) {
	p := tinyProfile()
	p.MaxNumSeqs = 64
	p.MaxModelLen = 1024
	p.DecodeSecondsPerKVToken = 1e-7
	p.KVCapacityTokens = 64 * 1024 // room for all 64 streams: no preemption
	loadBench(b, p, 200, 64, 100, 100, 0, 500)
}

func loadBench(b *testing.B, p Profile, scale float64, sessions, minWords, maxWords, growth, answer int) {
	s, url := startSim(b, p, scale)
	model := s.Profile().Model
	size := func(i int) int {
		if sessions == 1 {
			return minWords
		}
		return minWords + i*(maxWords-minWords)/(sessions-1)
	}
	sess := make([]*session, sessions)
	for i := range sess {
		sess[i] = newSession(fmt.Sprintf("s%d-", i), size(i)+growth*(b.N/sessions+2))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sessions}}
	var left, tokens atomic.Int64
	left.Store(int64(b.N))

	b.ResetTimer()
	wall, cpu := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for i, ss := range sess {
		wg.Go(func() {
			n := size(i)
			for left.Add(-1) >= 0 {
				resp, err := client.Post(url+"/v1/chat/completions", "application/json", ss.body(model, n, answer))
				if err != nil {
					b.Error(err)
					return
				}
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if bytes.Contains(sc.Bytes(), []byte(`"content":"`)) && !bytes.Contains(sc.Bytes(), []byte(`"role"`)) {
						tokens.Add(1)
					}
				}
				resp.Body.Close()
				n += growth
			}
		})
	}
	wg.Wait()
	elapsed, used := time.Since(wall), cpuTime()-cpu
	b.StopTimer()

	fams := scrape(b, url)
	b.ReportMetric(used.Seconds()/elapsed.Seconds(), "cpu-cores")
	b.ReportMetric(float64(tokens.Load())/elapsed.Seconds(), "tok/s")
	b.ReportMetric(float64(used.Nanoseconds())/float64(max(tokens.Load(), 1)), "cpu-ns/tok")
	b.ReportMetric(value(b, fams, "headroom_sim_lag_max_seconds"), "lag-max-s")
	b.ReportMetric(value(b, fams, "vllm:num_preemptions_total"), "preemptions")
	sum, n := hist(b, fams, "vllm:request_time_per_output_token_seconds")
	b.ReportMetric(sum/float64(max(n, 1)), "tpot-s")
	if want := int64(b.N * answer); tokens.Load() != want {
		b.Errorf("streamed %d tokens, want %d", tokens.Load(), want)
	}
}
