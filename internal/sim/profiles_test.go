package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltInProfiles(t *testing.T) {
	for _, name := range ProfileNames() {
		p, err := ProfileByName(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s does not validate: %v", name, err)
		}
	}
	if p, _ := ProfileByName("default"); p != DefaultProfile() {
		t.Error("default is not DefaultProfile")
	}
	if _, err := ProfileByName("nope"); err == nil || !strings.Contains(err.Error(), "tiny") {
		t.Errorf("unknown profile error %v does not list the known ones", err)
	}
}

func TestParseProfile(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		check func(t *testing.T, p Profile)
		err   string // part of the error, when one is wanted
	}{
		// Engine fields only, in YAML.
		{"yaml fields", `
name: mine
model: m
max_model_len: 4096
block_size: 16
kv_capacity_tokens: 100000
max_num_seqs: 32
max_batched_tokens: 2048
prefill_tokens_per_second: 5000
decode_base_seconds: 0.02
`, func(t *testing.T, p Profile) {
			if p.Model != "m" || p.KVCapacityTokens != 100000 || p.DecodeBaseSeconds != 0.02 {
				t.Errorf("profile = %+v", p)
			}
		}, ""},
		// Costs derived from hardware and model, in JSON; an explicit field wins.
		{"derived", `{"name":"d","model":"m","max_model_len":8192,"block_size":16,"max_num_seqs":64,"max_batched_tokens":4096,
			"decode_base_seconds":0.05,
			"hardware":{"gpus":2,"gpu_memory_gb":80,"memory_bandwidth_tb_s":2,"tflops":500},
			"model_spec":{"weights_gb":20,"active_params_b":10,"kv_bytes_per_token":100000}}`,
			func(t *testing.T, p Profile) {
				// (2 x (80 x 0.9 - 5) - 20) GB / 100 KB = 1.14M tokens.
				if p.KVCapacityTokens != 1140000 {
					t.Errorf("kv_capacity_tokens = %d, want 1140000", p.KVCapacityTokens)
				}
				if p.DecodeBaseSeconds != 0.05 {
					t.Errorf("the explicit decode_base_seconds was overridden: %g", p.DecodeBaseSeconds)
				}
				// 100 KB / (4 TB/s x 0.4) = 62.5 ns; 2 x 500 TFLOP/s x 0.4 / 20 GFLOP = 20K tokens/s.
				if math.Abs(p.DecodeSecondsPerKVToken-62.5e-9) > 1e-15 || math.Abs(p.PrefillTokensPerSecond-20000) > 1e-6 {
					t.Errorf("derived costs %g s/token, %g tokens/s", p.DecodeSecondsPerKVToken, p.PrefillTokensPerSecond)
				}
			}, ""},
		// Unknown fields are refused.
		{"unknown field", `{"name":"x","modle":"m"}`, nil, "unknown field"},
		// Hardware without a model cannot derive anything.
		{"half", `{"model":"m","hardware":{"gpus":1,"gpu_memory_gb":80,"memory_bandwidth_tb_s":2,"tflops":500}}`, nil, "model_spec"},
		// Weights that do not fit.
		{"too big", `{"model":"m","max_model_len":1024,"block_size":16,"max_num_seqs":1,"max_batched_tokens":1024,
			"hardware":{"gpus":1,"gpu_memory_gb":24,"memory_bandwidth_tb_s":1,"tflops":100},"model_spec":{"weights_gb":70,"active_params_b":70,"kv_bytes_per_token":1000}}`, nil, "no KV cache"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProfile([]byte(tc.text), "test")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
	// LoadProfile reads the same from a file.
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("name: f\nmodel: m\nmax_model_len: 64\nblock_size: 4\nkv_capacity_tokens: 256\nmax_num_seqs: 2\nmax_batched_tokens: 64\nprefill_tokens_per_second: 100\ndecode_base_seconds: 0.01\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := LoadProfile(path); err != nil || p.Name != "f" {
		t.Errorf("LoadProfile = %+v, %v", p, err)
	}
}
