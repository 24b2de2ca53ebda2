package sim

import (
	"fmt"
	"strings"
)

// personality is the engine the simulator behaves like: its scheduler's
// policy and the metrics it exposes.
type personality struct {
	name    string
	ownedBy string // /v1/models owned_by
	metrics func(p Profile) *metrics
	// prefillFirst runs prefill batches alone, pausing decodes, and admits
	// with SGLang's new-token-ratio reserve (see engine.scheduleSGLang).
	prefillFirst bool
}

// Personalities lists the engines the simulator can behave like.
func Personalities() []string { return []string{"vllm", "sglang"} }

func personalityByName(name string) (personality, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "vllm":
		return personality{name: "vllm", ownedBy: "vllm", metrics: newMetrics}, nil
	case "sglang":
		return personality{name: "sglang", ownedBy: "sglang", metrics: newSGLangMetrics, prefillFirst: true}, nil
	}
	return personality{}, fmt.Errorf("sim options: personality %q: use one of %s", name, strings.Join(Personalities(), ", "))
}
