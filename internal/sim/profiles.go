package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// builtInProfiles are the profiles ProfileByName knows, each a function so
// callers get their own copy.
var builtInProfiles = map[string]func() Profile{
	"default":        DefaultProfile,
	"glm-16xrtx6000": DefaultProfile,
	"glm-16xrtx6000-128k": func() Profile {
		// Recipe 0's hardware serving a 128K context: the same engine, a
		// shorter context (so more sequences fit the same KV cache).
		p := DefaultProfile()
		p.Name, p.MaxModelLen = "glm-16xrtx6000-128k", 131072
		return p
	},
	"reference": ReferenceProfile,
	"reference-128k": func() Profile {
		// The reference recipes' engine serving a 128K context (recipe 2).
		p := ReferenceProfile()
		p.Name, p.MaxModelLen = "reference-128k", 131072
		return p
	},
	"dense70b-8xh100": func() Profile {
		// A 70B dense model in FP8 on 8 H100 SXM (80 GB, 3.35 TB/s, NVLink),
		// derived from its hardware: see Hardware.Derive.
		p, _ := ProfileFile{
			Profile:  Profile{Name: "dense70b-8xh100", Model: "llama-70b", MaxModelLen: 131072, BlockSize: 16, MaxNumSeqs: 256, MaxBatchedTokens: 8192},
			Hardware: &Hardware{GPUs: 8, GPUMemoryGB: 80, MemoryBandwidthTBs: 3.35, TFLOPs: 990, CommSecondsPerStep: 0.002},
			Spec:     &ModelSpec{WeightsGB: 70, ActiveParamsB: 70, KVBytesPerToken: 327680, AttentionFLOPsPerTokenPair: 4 * 80 * 8192},
		}.Resolve()
		return p
	},
	"tiny": func() Profile {
		// A small, fast engine for demos and tests: 10 ms steps, 2K context.
		return Profile{
			Name: "tiny", Model: "tiny-model", MaxModelLen: 2048, BlockSize: 4, KVCapacityTokens: 16384,
			MaxNumSeqs: 16, MaxBatchedTokens: 256, PrefillTokensPerSecond: 10000,
			DecodeBaseSeconds: 0.010, DecodeSecondsPerKVToken: 1e-5,
		}
	},
}

// glmSizing is how the GLM profiles resize (see Sizing): 16 RTX PRO 6000
// cards in two pipeline stages of 8 (recipe 0's --pipeline-parallel-size 2
// --tensor-parallel-size 8), ~400 GB of FP8 weights, and per card 96 GB at
// 0.9 utilisation less 5 GB reserved (Hardware.Derive's defaults). With
// them an 8-GPU engine keeps 1.37M x (8 x 81.4 - 400) / (16 x 81.4 - 400),
// about 381K tokens, of DefaultProfile's KV cache.
func glmSizing() Sizing {
	return Sizing{GPUs: 16, StageGPUs: 8, WeightsGB: 400, UsableGBPerGPU: 96*0.9 - 5}
}

// ReferenceProfile is the engine of the reference report's recipes as the
// fidelity study (docs/fidelity.md) sets it: DefaultProfile's GLM-class MoE
// on 16 RTX PRO 6000 in recipe 0's layout, two pipeline stages of eight
// cards (--pipeline-parallel-size 2 --tensor-parallel-size 8), with the
// numbers that layout implies rather than the default run's tuning:
//   - KV cache: the memory glmSizing leaves after the weights, 16 x 81.4 GB
//     less 400 GB, over 376,832 bytes a token: ~2.39M tokens. Tensor
//     parallelism over 8 ranks with 8 KV heads stores each head once, so
//     nothing is stored twice. The report's SGLang recipe kept its cache
//     from filling at about 10 sessions ("the KV cache never filled"), and
//     its host cache added nothing: a 1.37M cache evicts there.
//   - Decode: a step passes the two stages one after the other, so a
//     context token's 376 KB of KV is read on one stage's 8 cards at a time
//     (14.4 TB/s: 26 ns at peak); 50 ns is about half of peak, as long
//     attention over PCIe-linked cards runs. The fixed part of a step is
//     14 ms: the active experts' ~32 GB of FP8 weights on each stage's 8
//     cards (~4 ms at 60% of their bandwidth) and two all-reduces a layer
//     over PCIe with small messages (~10 ms). Per context token this is
//     slower than DefaultProfile (30 ns) and per step faster (22 ms): long
//     contexts (heavy sessions) decode slower, short ones as before.
//   - Prefill 20K tokens/s and 0.25 ns per token pair of attention:
//     DefaultProfile's PCIe all-reduce bound (~25K) less the pipeline's hop
//     between the two nodes for every chunk.
//   - 128 sequences and 8192-token chunks: DefaultProfile's (vLLM's and
//     SGLang's defaults on 96 GB cards).
//
// docs/simulator.md (Fidelity) has the candidates the study compared and
// what each changed.
func ReferenceProfile() Profile {
	s := glmSizing()
	p := DefaultProfile()
	p.Name = "reference"
	p.KVCapacityTokens = int((float64(s.GPUs)*s.UsableGBPerGPU - s.WeightsGB) * 1e9 / DefaultKVBytesPerToken)
	p.PrefillTokensPerSecond = 20000
	p.PrefillAttentionSecondsPerKVToken = 2.5e-10
	p.DecodeBaseSeconds = 0.014
	p.DecodeSecondsPerKVToken = 5e-8
	return p
}

// sizingByName is how a built-in profile resizes; ok is false for a profile
// that says nothing of its GPUs (tiny).
func sizingByName(name string) (s Sizing, ok bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "default", "glm-16xrtx6000", "glm-16xrtx6000-128k", "reference", "reference-128k":
		return glmSizing(), true
	case "dense70b-8xh100":
		// its hardware block below: 8 H100 of 80 GB, 70 GB of weights, one
		// stage of tensor parallelism
		return Sizing{GPUs: 8, WeightsGB: 70, UsableGBPerGPU: 80*0.9 - 5}, true
	}
	return Sizing{}, false
}

// LookupProfile returns the built-in profile name ("" is DefaultProfile) or,
// when no built-in has that name, the profile file at path, with how it
// resizes: nil when the profile says nothing of its GPUs (a file with
// neither a sizing block nor hardware and model_spec, or tiny).
func LookupProfile(name, path string) (Profile, *Sizing, error) {
	if strings.TrimSpace(name) == "" {
		name = "default"
	}
	if p, err := ProfileByName(name); err == nil {
		if s, ok := sizingByName(name); ok {
			return p, &s, nil
		}
		return p, nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, nil, fmt.Errorf("%q is neither a built-in sim profile (%s) nor a readable profile file: %w", name, strings.Join(ProfileNames(), ", "), err)
	}
	f, p, err := parseProfileFile(data, path)
	if err != nil {
		return Profile{}, nil, err
	}
	s, ok := f.sizing()
	if !ok {
		return p, nil, nil
	}
	return p, &s, nil
}

// ProfileNames lists the built-in profiles.
func ProfileNames() []string {
	out := make([]string, 0, len(builtInProfiles))
	for n := range builtInProfiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ProfileByName returns a built-in profile; "default" is DefaultProfile.
func ProfileByName(name string) (Profile, error) {
	f, ok := builtInProfiles[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Profile{}, fmt.Errorf("no built-in sim profile %q: use one of %s, or a profile file", name, strings.Join(ProfileNames(), ", "))
	}
	return f(), nil
}

// Hardware describes the GPUs a profile runs on, for deriving engine costs.
type Hardware struct {
	GPUs               int     `json:"gpus"`
	GPUMemoryGB        float64 `json:"gpu_memory_gb"`         // per GPU
	MemoryBandwidthTBs float64 `json:"memory_bandwidth_tb_s"` // per GPU
	TFLOPs             float64 `json:"tflops"`                // dense, per GPU, at the weights' precision
	// MemoryUtilization is the share of GPU memory the engine takes (default 0.9).
	MemoryUtilization float64 `json:"gpu_memory_utilization,omitempty"`
	// ReservedGB is memory per GPU kept for activations and graphs (default 5).
	ReservedGB float64 `json:"reserved_gb,omitempty"`
	// WeightEfficiency is the share of peak bandwidth a decode step reads
	// weights at (default 0.6); KVEfficiency the share attention reads KV at
	// (default 0.4); ComputeEfficiency the share of peak FLOP/s prefill
	// reaches (default 0.4).
	WeightEfficiency  float64 `json:"weight_efficiency,omitempty"`
	KVEfficiency      float64 `json:"kv_efficiency,omitempty"`
	ComputeEfficiency float64 `json:"compute_efficiency,omitempty"`
	// CommSecondsPerStep is the fixed communication cost of a step (tensor-
	// parallel all-reduces): small on NVLink, tens of ms over PCIe.
	CommSecondsPerStep float64 `json:"comm_seconds_per_step,omitempty"`
}

// ModelSpec describes the served model's size, for deriving engine costs.
type ModelSpec struct {
	WeightsGB float64 `json:"weights_gb"` // all weights, as stored
	// ActiveWeightsGB is what one decode step reads (a MoE's active
	// experts); 0 means WeightsGB.
	ActiveWeightsGB float64 `json:"active_weights_gb,omitempty"`
	ActiveParamsB   float64 `json:"active_params_b"`    // billions of parameters used per token
	KVBytesPerToken float64 `json:"kv_bytes_per_token"` // layers x KV heads x head dim x 2 (K, V) x bytes
	// AttentionFLOPsPerTokenPair is prefill attention work per (token, earlier
	// token) pair, about 4 x layers x attention width; 0 leaves it out.
	AttentionFLOPsPerTokenPair float64 `json:"attention_flops_per_token_pair,omitempty"`
}

// ProfileFile is a profile as written in a file: engine fields, and
// optionally the hardware and model they are derived from. Fields given
// explicitly win over derived ones.
type ProfileFile struct {
	Profile
	Hardware *Hardware  `json:"hardware,omitempty"`
	Spec     *ModelSpec `json:"model_spec,omitempty"`
	// Sizing says how the profile resizes to other GPU counts; without it,
	// hardware and model_spec give one (a single stage of hardware.gpus).
	Sizing *Sizing `json:"sizing,omitempty"`
}

// sizing is the file's sizing block, else the one its hardware and model
// imply; ok is false when it has neither.
func (f ProfileFile) sizing() (Sizing, bool) {
	switch {
	case f.Sizing != nil:
		return *f.Sizing, true
	case f.Hardware != nil && f.Spec != nil:
		h := *f.Hardware
		return Sizing{GPUs: h.GPUs, WeightsGB: f.Spec.WeightsGB, UsableGBPerGPU: h.GPUMemoryGB*orDefault(h.MemoryUtilization, 0.9) - orDefault(h.ReservedGB, 5)}, true
	}
	return Sizing{}, false
}

// Resolve fills the engine fields left at zero from the hardware and model
// blocks, and validates the result.
func (f ProfileFile) Resolve() (Profile, error) {
	p := f.Profile
	if (f.Hardware == nil) != (f.Spec == nil) {
		return Profile{}, errors.New("sim profile: give both hardware and model_spec to derive costs, or neither")
	}
	if f.Hardware != nil {
		d, err := f.Hardware.Derive(*f.Spec)
		if err != nil {
			return Profile{}, err
		}
		fill := func(dst *float64, v float64) {
			if *dst == 0 {
				*dst = v
			}
		}
		if p.KVCapacityTokens == 0 {
			p.KVCapacityTokens = d.KVCapacityTokens
		}
		fill(&p.PrefillTokensPerSecond, d.PrefillTokensPerSecond)
		fill(&p.PrefillAttentionSecondsPerKVToken, d.PrefillAttentionSecondsPerKVToken)
		fill(&p.DecodeBaseSeconds, d.DecodeBaseSeconds)
		fill(&p.DecodeSecondsPerKVToken, d.DecodeSecondsPerKVToken)
		fill(&p.KVBytesPerToken, f.Spec.KVBytesPerToken)
	}
	return p, p.Validate()
}

func orDefault(v, d float64) float64 {
	if v > 0 {
		return v
	}
	return d
}

// Derive turns hardware and model sizes into engine costs: KV capacity from
// the memory left after weights; a decode step's fixed cost from reading
// the active weights plus communication; its per-context-token cost from
// reading KV; prefill from compute at the active parameter count.
func (h Hardware) Derive(m ModelSpec) (Profile, error) {
	if h.GPUs <= 0 || h.GPUMemoryGB <= 0 || h.MemoryBandwidthTBs <= 0 || h.TFLOPs <= 0 {
		return Profile{}, errors.New("sim profile hardware: gpus, gpu_memory_gb, memory_bandwidth_tb_s and tflops must all be positive")
	}
	if m.WeightsGB <= 0 || m.ActiveParamsB <= 0 || m.KVBytesPerToken <= 0 {
		return Profile{}, errors.New("sim profile model_spec: weights_gb, active_params_b and kv_bytes_per_token must all be positive")
	}
	gpus := float64(h.GPUs)
	free := gpus*(h.GPUMemoryGB*orDefault(h.MemoryUtilization, 0.9)-orDefault(h.ReservedGB, 5)) - m.WeightsGB
	if free <= 0 {
		return Profile{}, fmt.Errorf("sim profile: %.0f GB of weights leave no KV cache on %d x %.0f GB: add GPUs or quantise", m.WeightsGB, h.GPUs, h.GPUMemoryGB)
	}
	bw := gpus * h.MemoryBandwidthTBs * 1e12
	flops := gpus * h.TFLOPs * 1e12 * orDefault(h.ComputeEfficiency, 0.4)
	return Profile{
		KVCapacityTokens:                  int(free * 1e9 / m.KVBytesPerToken),
		DecodeBaseSeconds:                 orDefault(m.ActiveWeightsGB, m.WeightsGB)*1e9/(bw*orDefault(h.WeightEfficiency, 0.6)) + h.CommSecondsPerStep,
		DecodeSecondsPerKVToken:           m.KVBytesPerToken / (bw * orDefault(h.KVEfficiency, 0.4)),
		PrefillTokensPerSecond:            flops / (2 * m.ActiveParamsB * 1e9),
		PrefillAttentionSecondsPerKVToken: m.AttentionFLOPsPerTokenPair / flops,
	}, nil
}

// LoadProfile reads a profile file, YAML or JSON (a ProfileFile), refusing
// unknown fields, and resolves and validates it.
func LoadProfile(path string) (Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("sim profile: %w", err)
	}
	return ParseProfile(data, path)
}

// ParseProfile reads a profile file's content; name is used in errors.
func ParseProfile(data []byte, name string) (Profile, error) {
	_, p, err := parseProfileFile(data, name)
	return p, err
}

// parseProfileFile decodes a profile file strictly and resolves its profile.
func parseProfileFile(data []byte, name string) (ProfileFile, Profile, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return ProfileFile{}, Profile{}, fmt.Errorf("sim profile %s: %w", name, err)
	}
	var f ProfileFile
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return ProfileFile{}, Profile{}, fmt.Errorf("sim profile %s: %w (see docs/simulator.md for the fields)", name, err)
	}
	p, err := f.Resolve()
	if err != nil {
		return ProfileFile{}, Profile{}, fmt.Errorf("sim profile %s: %w", name, err)
	}
	if s, ok := f.sizing(); ok {
		if err := s.validate(); err != nil {
			return ProfileFile{}, Profile{}, fmt.Errorf("sim profile %s: %w", name, err)
		}
	}
	return f, p, nil
}
