package sim

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultHostBytesPerSecondPerGPU is the host-to-GPU copy rate of one GPU
// for the host cache tier when a topology names none: pinned memory over a
// PCIe 5 x16 link, about 50 GB/s.
const DefaultHostBytesPerSecondPerGPU = 5e10

// Sizing says how a profile's engine changes with the GPUs it is given. The
// model is pipeline parallelism over whole stages: recipe 0 runs
// --pipeline-parallel-size 2 --tensor-parallel-size 8, two stages of one
// node's 8 GPUs. Every engine holds the whole model, so:
//   - KV capacity follows the memory left after the weights: the profile's
//     KV capacity times (GPUs x usable - weights) / (its GPUs x usable -
//     weights), which keeps whatever share of that memory the profile was
//     tuned to;
//   - prefill throughput follows the GPUs (chunks are pipelined through the
//     stages), and so do the host cache tier's size and copy rate;
//   - a decode step's costs stay: a step passes every layer once on one
//     stage's width of cards whichever number of stages holds them, so more
//     stages buy memory and prefill throughput, not per-user speed.
type Sizing struct {
	// GPUs is how many GPUs the profile describes.
	GPUs int `json:"gpus"`
	// StageGPUs is the GPUs of one pipeline stage (the tensor-parallel
	// width); an engine's GPUs must be a whole number of stages. 0 means
	// GPUs: the profile can then only be multiplied.
	StageGPUs int `json:"stage_gpus,omitempty"`
	// WeightsGB is the model's weights, which every engine holds whole.
	WeightsGB float64 `json:"weights_gb"`
	// UsableGBPerGPU is each GPU's memory for weights and KV: its memory x
	// the engine's utilisation, less what activations and graphs reserve.
	UsableGBPerGPU float64 `json:"usable_gb_per_gpu"`
}

func (s Sizing) stage() int {
	if s.StageGPUs > 0 {
		return s.StageGPUs
	}
	return s.GPUs
}

// validate reports the first field that cannot size an engine.
func (s Sizing) validate() error {
	if s.GPUs < 1 || s.StageGPUs < 0 || !(s.WeightsGB > 0) || !(s.UsableGBPerGPU > 0) {
		return fmt.Errorf("sim profile sizing %+v: gpus must be at least 1, stage_gpus at least 0, weights_gb and usable_gb_per_gpu positive", s)
	}
	if s.GPUs%s.stage() != 0 {
		return fmt.Errorf("sim profile sizing: gpus %d is not a whole number of %d-GPU stages", s.GPUs, s.stage())
	}
	if float64(s.GPUs)*s.UsableGBPerGPU <= s.WeightsGB {
		return fmt.Errorf("sim profile sizing: %g GB of weights leave no KV cache on the profile's own %d GPUs of %g GB usable", s.WeightsGB, s.GPUs, s.UsableGBPerGPU)
	}
	return nil
}

// Resize returns p as an engine of gpus GPUs of the same kind (see Sizing).
// When the resized KV cache cannot hold one max_model_len sequence, an
// SGLang engine serves shorter requests (its scheduler caps a request at
// min(context_len, max_total_num_tokens) - 1 tokens, tp_worker.py
// max_req_len), so max_model_len is lowered to that; vLLM refuses to start
// ("To serve at least one request with the model's max seq len ...",
// _check_enough_kv_cache_memory in vllm/v1/core/kv_cache_utils.py), so
// Resize fails.
func (s Sizing) Resize(p Profile, gpus int, personality string) (Profile, error) {
	if err := s.validate(); err != nil {
		return Profile{}, err
	}
	if gpus == s.GPUs {
		return p, nil
	}
	if gpus < 1 || gpus%s.stage() != 0 {
		return Profile{}, fmt.Errorf("sim profile %q: %d GPUs is not a whole number of its %d-GPU pipeline stages", p.Name, gpus, s.stage())
	}
	free0 := float64(s.GPUs)*s.UsableGBPerGPU - s.WeightsGB
	free := float64(gpus)*s.UsableGBPerGPU - s.WeightsGB
	if free <= 0 {
		return Profile{}, fmt.Errorf("sim profile %q: %g GB of weights do not fit on %d GPUs of %g GB usable: give the engine more GPUs", p.Name, s.WeightsGB, gpus, s.UsableGBPerGPU)
	}
	r := float64(gpus) / float64(s.GPUs)
	q := p
	q.Name = fmt.Sprintf("%s@%dgpu", p.Name, gpus)
	q.KVCapacityTokens = int(float64(p.KVCapacityTokens) * free / free0)
	q.PrefillTokensPerSecond *= r
	q.PrefillAttentionSecondsPerKVToken /= r
	q.HostCacheTokens = int(float64(p.HostCacheTokens) * r)
	q.HostBandwidthBytesPerSecond *= r
	if q.BlockSize > 0 {
		if whole := q.KVCapacityTokens / q.BlockSize * q.BlockSize; whole < q.MaxModelLen {
			if !strings.EqualFold(personality, "sglang") {
				return Profile{}, fmt.Errorf("sim profile %q on %d GPUs: a KV cache of %d tokens cannot hold one %d-token sequence, and vLLM refuses to start so: lower max_model_len or give the engine more GPUs", p.Name, gpus, q.KVCapacityTokens, q.MaxModelLen)
			}
			q.MaxModelLen = whole - 1
		}
	}
	return q, q.Validate()
}

// WithHostCache returns p with a host-memory cache tier of bytes (0 leaves p
// as it is), copied to the GPUs at bytesPerSecond.
func (p Profile) WithHostCache(bytes, bytesPerSecond float64) Profile {
	if bytes > 0 {
		p.HostCacheTokens = int(bytes / p.kvBytesPerToken())
		p.HostBandwidthBytesPerSecond = bytesPerSecond
	}
	return p
}

// Topology is how a recipe's GPUs are split into simulated engines: Copies
// serving engines (the decode engines when there is a prefill engine) of
// GPUsPerCopy GPUs each, optionally PrefillEngines prefill engines of
// PrefillGPUs each, and a host cache tier on every engine in proportion to
// its GPUs.
type Topology struct {
	// Copies is the engines behind the router; 0 reads as 1.
	Copies int
	// GPUsPerCopy is each copy's GPUs; 0 runs the profile as it is written.
	GPUsPerCopy int
	// PrefillEngines is 0 (no split) or 1: one prefill engine is modelled.
	PrefillEngines int
	// PrefillGPUs is the prefill engine's GPUs; 0 means GPUsPerCopy.
	PrefillGPUs int
	// HostCacheBytesPerGPU is the host memory each GPU's share of an engine
	// keeps KV in (a node's pinned RAM over its GPUs); 0 means none.
	HostCacheBytesPerGPU float64
	// HostBytesPerSecondPerGPU is each GPU's host-to-GPU copy rate; 0 means
	// DefaultHostBytesPerSecondPerGPU.
	HostBytesPerSecondPerGPU float64
}

// Profiles returns the profile of each copy and, with a prefill engine, the
// prefill engine's: p resized by s to each engine's GPUs, with its share of
// the host cache. s may be nil only when no engine is resized and there is
// no host cache.
func (t Topology) Profiles(p Profile, s *Sizing, personality string) (copies Profile, prefill *Profile, err error) {
	if t.Copies < 0 || t.GPUsPerCopy < 0 || t.PrefillGPUs < 0 || t.HostCacheBytesPerGPU < 0 || t.HostBytesPerSecondPerGPU < 0 {
		return Profile{}, nil, fmt.Errorf("sim topology %+v: counts, sizes and rates must be >= 0", t)
	}
	if t.PrefillEngines < 0 || t.PrefillEngines > 1 {
		return Profile{}, nil, fmt.Errorf("sim topology: %d prefill engines: one is modelled (0 for none)", t.PrefillEngines)
	}
	if t.PrefillEngines == 0 && t.PrefillGPUs > 0 {
		return Profile{}, nil, errors.New("sim topology: prefill GPUs are given but there is no prefill engine")
	}
	engine := func(role string, gpus int) (Profile, error) {
		if s == nil {
			if gpus > 0 || t.HostCacheBytesPerGPU > 0 {
				return Profile{}, fmt.Errorf("sim profile %q says nothing of the GPUs it runs on (no sizing), so its %s cannot be given its own GPUs or host cache: use a built-in GLM profile or add a sizing block to the profile file", p.Name, role)
			}
			return p, nil
		}
		if gpus == 0 {
			gpus = s.GPUs
		}
		q, err := s.Resize(p, gpus, personality)
		if err != nil {
			return Profile{}, fmt.Errorf("%s: %w", role, err)
		}
		bps := t.HostBytesPerSecondPerGPU
		if bps == 0 {
			bps = DefaultHostBytesPerSecondPerGPU
		}
		return q.WithHostCache(t.HostCacheBytesPerGPU*float64(gpus), bps*float64(gpus)), nil
	}
	role := "each copy"
	if t.PrefillEngines == 1 {
		role = "each decode copy"
	}
	if copies, err = engine(role, t.GPUsPerCopy); err != nil {
		return Profile{}, nil, err
	}
	if t.PrefillEngines == 1 {
		gpus := t.PrefillGPUs
		if gpus == 0 {
			gpus = t.GPUsPerCopy
		}
		pp, err := engine("the prefill engine", gpus)
		if err != nil {
			return Profile{}, nil, err
		}
		prefill = &pp
	}
	return copies, prefill, nil
}
