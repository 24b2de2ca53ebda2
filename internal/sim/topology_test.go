package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResize resizes the default profile (16 GPUs, two stages of 8) to other
// GPU counts: KV follows the memory left after the weights, prefill the
// GPUs, decode stays.
func TestResize(t *testing.T) {
	base := DefaultProfile()
	s := glmSizing()
	// (8 x 81.4 - 400) / (16 x 81.4 - 400) = 251.2 / 902.4 of the KV cache.
	u := s.UsableGBPerGPU // 81.4
	kv8 := int(float64(base.KVCapacityTokens) * (8*u - 400) / (16*u - 400))
	tests := []struct {
		name        string
		profile     Profile
		gpus        int
		personality string
		err         string // part of the error, when one is wanted
		check       func(t *testing.T, p Profile)
	}{
		// Its own GPU count: the profile as it is.
		{"same", base, 16, "vllm", "", func(t *testing.T, p Profile) {
			if p != base {
				t.Errorf("resized to its own 16 GPUs: %+v, want the profile unchanged", p)
			}
		}},
		// One node for SGLang: a KV cache of ~381K tokens, under one 512K
		// sequence, so requests are capped at what it holds.
		{"sglang on 8", base, 8, "sglang", "", func(t *testing.T, p Profile) {
			if p.KVCapacityTokens != kv8 || kv8 < 380000 || kv8 > 382000 {
				t.Errorf("kv_capacity_tokens = %d, want %d (about 381K)", p.KVCapacityTokens, kv8)
			}
			if p.PrefillTokensPerSecond != base.PrefillTokensPerSecond/2 || p.PrefillAttentionSecondsPerKVToken != base.PrefillAttentionSecondsPerKVToken*2 {
				t.Errorf("prefill %g tokens/s, attention %g: want half the rate, twice the attention cost", p.PrefillTokensPerSecond, p.PrefillAttentionSecondsPerKVToken)
			}
			if p.DecodeBaseSeconds != base.DecodeBaseSeconds || p.DecodeSecondsPerKVToken != base.DecodeSecondsPerKVToken {
				t.Errorf("decode %g s + %g s/token: want the decode step unchanged", p.DecodeBaseSeconds, p.DecodeSecondsPerKVToken)
			}
			if want := kv8/16*16 - 1; p.MaxModelLen != want {
				t.Errorf("max_model_len = %d, want %d (SGLang's max_req_len: what the KV cache holds, less one)", p.MaxModelLen, want)
			}
			if p.Name != "glm-16xrtx6000@8gpu" {
				t.Errorf("name = %q", p.Name)
			}
		}},
		// vLLM refuses to start an engine that cannot hold one max_model_len sequence.
		{"vllm on 8", base, 8, "vllm", "cannot hold one 524288-token sequence", nil},
		// With a 128K context one node holds several sequences.
		{"vllm 128k on 8", func() Profile { p, _ := ProfileByName("glm-16xrtx6000-128k"); return p }(), 8, "vllm", "", func(t *testing.T, p Profile) {
			if p.MaxModelLen != 131072 || p.KVCapacityTokens != kv8 {
				t.Errorf("max_model_len %d, kv %d: want 131072 and %d", p.MaxModelLen, p.KVCapacityTokens, kv8)
			}
		}},
		// Four stages: more memory and prefill, the same decode step.
		{"32", base, 32, "vllm", "", func(t *testing.T, p Profile) {
			want := int(float64(base.KVCapacityTokens) * (32*u - 400) / (16*u - 400))
			if p.KVCapacityTokens != want || p.PrefillTokensPerSecond != 2*base.PrefillTokensPerSecond || p.MaxModelLen != base.MaxModelLen {
				t.Errorf("kv %d (want %d), prefill %g, max_model_len %d", p.KVCapacityTokens, want, p.PrefillTokensPerSecond, p.MaxModelLen)
			}
		}},
		// Not a whole number of 8-GPU stages.
		{"12", base, 12, "vllm", "whole number", nil},
		// The weights do not fit on 4 GPUs... which is also not a whole stage.
		{"4", base, 4, "sglang", "whole number", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Resize(tc.profile, tc.gpus, tc.personality)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("resized profile does not validate: %v", err)
			}
			tc.check(t, p)
		})
	}
	// Weights that do not fit the GPUs given.
	small := Sizing{GPUs: 16, StageGPUs: 4, WeightsGB: 400, UsableGBPerGPU: 81.4}
	if _, err := small.Resize(base, 4, "sglang"); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("400 GB on 4 GPUs: error %v, want 'do not fit'", err)
	}
}

// TestTopologyProfiles splits a recipe's GPUs into engines: the reference
// report's recipe 4 (one prefill engine of 16 GPUs, two decode copies of 8)
// and recipe 5 (one SGLang engine with 0.8 TiB of pinned host RAM per node).
func TestTopologyProfiles(t *testing.T) {
	base := DefaultProfile()
	s := glmSizing()
	tib := math.Pow(2, 40)
	// Recipe 4.
	dec, pre, err := Topology{Copies: 2, GPUsPerCopy: 8, PrefillEngines: 1, PrefillGPUs: 16}.Profiles(base, &s, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	if pre == nil || *pre != base {
		t.Errorf("prefill engine %+v, want the 16-GPU profile as it is", pre)
	}
	if dec.KVCapacityTokens >= base.KVCapacityTokens/3 || dec.PrefillTokensPerSecond != base.PrefillTokensPerSecond/2 {
		t.Errorf("decode copy kv %d, prefill %g: want an 8-GPU engine", dec.KVCapacityTokens, dec.PrefillTokensPerSecond)
	}
	if dec.HostCacheTokens != 0 {
		t.Errorf("host cache %d tokens without one asked for", dec.HostCacheTokens)
	}
	// Recipe 5: 2 nodes x 0.8 TiB in the host tier, each GPU copying its
	// share at the default rate.
	p, pre, err := Topology{Copies: 1, GPUsPerCopy: 16, HostCacheBytesPerGPU: 0.8 * tib / 8}.Profiles(base, &s, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	if want := int(1.6 * tib / DefaultKVBytesPerToken); pre != nil || p.HostCacheTokens != want || p.HostBandwidthBytesPerSecond != 16*DefaultHostBytesPerSecondPerGPU {
		t.Errorf("host tier %d tokens at %g B/s (prefill %v), want %d tokens (1.6 TiB) at 16 x 5e10", p.HostCacheTokens, p.HostBandwidthBytesPerSecond, pre, want)
	}
	if p.KVCapacityTokens != base.KVCapacityTokens {
		t.Errorf("the host tier changed the GPU cache: %d", p.KVCapacityTokens)
	}
	// No GPUs given and no host cache: the profile as written, sized or not.
	tiny := tinyProfile()
	if p, _, err := (Topology{Copies: 2}).Profiles(tiny, nil, "vllm"); err != nil || p != tiny {
		t.Errorf("unsized profile with no GPUs given: %+v, %v", p, err)
	}
	bad := []struct {
		name string
		top  Topology
		s    *Sizing
		err  string
	}{
		// A profile that does not say its GPUs cannot be given others.
		{"unsized", Topology{Copies: 2, GPUsPerCopy: 8}, nil, "no sizing"},
		{"unsized host cache", Topology{HostCacheBytesPerGPU: 1e11}, nil, "no sizing"},
		// One prefill engine is modelled.
		{"two prefill", Topology{Copies: 2, PrefillEngines: 2}, &s, "one is modelled"},
		{"prefill gpus without prefill", Topology{Copies: 2, PrefillGPUs: 8}, &s, "no prefill engine"},
		// vLLM decode copies on one node cannot hold a 512K sequence.
		{"vllm decode on 8", Topology{Copies: 2, GPUsPerCopy: 8, PrefillEngines: 1, PrefillGPUs: 16}, &s, "each decode copy"},
	}
	for _, tc := range bad {
		personality := "sglang"
		if strings.HasPrefix(tc.name, "vllm") {
			personality = "vllm"
		}
		if _, _, err := tc.top.Profiles(base, tc.s, personality); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
		}
	}
}

// TestLookupProfile finds a built-in with its sizing, or reads a file's
// sizing block, or derives one from its hardware.
func TestLookupProfile(t *testing.T) {
	for _, name := range []string{"", "default", "glm-16xrtx6000-128k"} {
		if p, s, err := LookupProfile(name, "no-such-file"); err != nil || s == nil || *s != glmSizing() || p.Model == "" {
			t.Errorf("LookupProfile(%q) = %v, %v, %v: want a GLM profile with its sizing", name, p.Name, s, err)
		}
	}
	if _, s, err := LookupProfile("tiny", ""); err != nil || s != nil {
		t.Errorf("tiny: sizing %v, %v: want none", s, err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	fields := "name: f\nmodel: m\nmax_model_len: 64\nblock_size: 4\nkv_capacity_tokens: 256\nmax_num_seqs: 2\nmax_batched_tokens: 64\nprefill_tokens_per_second: 100\ndecode_base_seconds: 0.01\n"
	sized := write("sized.yaml", fields+"sizing: {gpus: 4, stage_gpus: 2, weights_gb: 10, usable_gb_per_gpu: 20}\n")
	if _, s, err := LookupProfile(sized, sized); err != nil || s == nil || *s != (Sizing{GPUs: 4, StageGPUs: 2, WeightsGB: 10, UsableGBPerGPU: 20}) {
		t.Errorf("sizing block: %v, %v", s, err)
	}
	derived := write("derived.yaml", "name: d\nmodel: m\nmax_model_len: 8192\nblock_size: 16\nmax_num_seqs: 64\nmax_batched_tokens: 4096\n"+
		"hardware: {gpus: 2, gpu_memory_gb: 80, memory_bandwidth_tb_s: 2, tflops: 500}\nmodel_spec: {weights_gb: 20, active_params_b: 10, kv_bytes_per_token: 100000}\n")
	if _, s, err := LookupProfile(derived, derived); err != nil || s == nil || *s != (Sizing{GPUs: 2, WeightsGB: 20, UsableGBPerGPU: 80*0.9 - 5}) {
		t.Errorf("derived sizing: %v, %v", s, err)
	}
	plain := write("plain.yaml", fields)
	if _, s, err := LookupProfile(plain, plain); err != nil || s != nil {
		t.Errorf("no sizing: %v, %v", s, err)
	}
	// A sizing whose weights do not fit its own GPUs is refused.
	broken := write("broken.yaml", fields+"sizing: {gpus: 1, weights_gb: 100, usable_gb_per_gpu: 20}\n")
	if _, _, err := LookupProfile(broken, broken); err == nil || !strings.Contains(err.Error(), "no KV cache") {
		t.Errorf("broken sizing: %v", err)
	}
	if _, _, err := LookupProfile("nope", filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "neither a built-in") {
		t.Errorf("unknown profile: %v", err)
	}
}
