// Package recipe describes one serving setup (engine, image, flags, GPU layout,
// copies, router, price, endpoint and how to deploy it), loads it from its own
// file, and compares a candidate with its parent under the one-change rule.
package recipe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/transport"
	"sigs.k8s.io/yaml"
)

// Recipe is one serving setup and what it costs. Its JSON names match the
// recipe section of the run file, so a run file can hold a recipe inline or
// name a recipe file in File.
type Recipe struct {
	// File names a recipe file to read instead of the fields below; see Resolve.
	File string `json:"file,omitempty"`

	Name   string `json:"name"`
	Engine string `json:"engine"`
	// Image is the engine's container image, tag included.
	Image string `json:"image,omitempty"`
	// Args are the engine's command-line flags, e.g. ["--max-num-seqs", "256"].
	Args []string `json:"args,omitempty"`
	// Parent is the recipe this one changes one thing from: a name, or a
	// recipe file (.yaml/.yml) relative to this recipe's file.
	Parent string `json:"parent,omitempty"`
	// Nodes x GPUsPerNode are the GPUs the recipe runs on and is priced on.
	// The built-in simulator sizes its engines from them; a real endpoint
	// may leave both 0: "GPUs not stated", and cost not priced.
	Nodes       int `json:"nodes"`
	GPUsPerNode int `json:"gpus_per_node"`
	// Copies is how many independent copies of the engine serve behind the
	// router; 0 reads as 1.
	Copies int `json:"copies,omitempty"`
	// Router is how the gateway spreads requests over copies, e.g.
	// round-robin, least-load, prefix-aware.
	Router        string  `json:"router,omitempty"`
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
	// Endpoint is the base URL of the OpenAI-compatible API (without /v1), or
	// "sim" for the built-in simulated gateway.
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// MaxModelLen and EngineVersion, when set, are checked in pre-flight
	// against what the server reports, so the wrong recipe being live fails
	// before any load.
	MaxModelLen   int    `json:"max_model_len,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	// APIKeyEnv names the environment variable whose value is sent to the
	// endpoint as "Authorization: Bearer <value>" (load, evals, /tokenize,
	// readiness). The key itself never appears in any file.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Headers are added to every request to the endpoint; a value may name
	// environment variables as ${NAME}. Values are never written out.
	Headers map[string]string `json:"headers,omitempty"`
	// TLS is how the endpoint's certificate is checked.
	TLS *transport.TLS `json:"tls,omitempty"`
	// Metrics lists the Prometheus /metrics URLs of the engines and gateway.
	Metrics []string `json:"metrics,omitempty"`
	// MetricsAuth is what is sent to the metrics targets (fixed or
	// discovered): a bearer token or basic auth from the environment,
	// headers, TLS.
	MetricsAuth *transport.Auth `json:"metrics_auth,omitempty"`
	// Prometheus reads the engines' metrics from a Prometheus server
	// instead of, or besides, scraping them.
	Prometheus *PrometheusSpec `json:"prometheus,omitempty"`
	// Discovery finds the pods to scrape instead of fixed metrics URLs.
	Discovery *DiscoverySpec `json:"discovery,omitempty"`
	// Mapping names the metric mapping from engine names to common names.
	Mapping string `json:"mapping"`
	// MappingFile adds or overrides mapping rules (YAML list of rules).
	MappingFile string `json:"mapping_file,omitempty"`
	// Sim configures the built-in simulator when Endpoint is "sim".
	Sim SimSpec `json:"sim,omitempty"`
	// Deploy says how the recipe is put up and how the previous one is put back.
	Deploy Deploy `json:"deploy,omitempty"`

	// Dir is the folder relative paths in the recipe (manifests, parent,
	// mapping file) are read from: the recipe file's folder. Not serialised.
	Dir string `json:"-"`
}

// SimSpec picks the built-in simulator's profile.
type SimSpec struct {
	// Profile is a built-in profile name or a profile file (YAML or JSON).
	Profile string `json:"profile,omitempty"`
	// Personality is vllm or sglang; default: the recipe's engine when it
	// is one of them, else vllm.
	Personality string `json:"personality,omitempty"`
	// Faults the simulator injects (see docs/simulator.md), as they would be
	// posted to its /admin/faults endpoint.
	Faults json.RawMessage `json:"faults,omitempty"`
	// PDLinkBytesPerSecond, when set, splits prefill from decode: a prefill
	// engine hands each request's KV to the decode copies over a link of this
	// bandwidth (e.g. 1.25e9 for 10 GbE TCP, 5e10 for RDMA).
	PDLinkBytesPerSecond float64 `json:"pd_link_bytes_per_second,omitempty"`
	// GPUsPerCopy is the GPUs each copy (each decode engine of a split) runs
	// on; the profile is resized to it (docs/simulator.md, "Engine size").
	// 0 runs every engine as the profile is written. When set, the engines'
	// GPUs must add up to nodes x gpus_per_node, the GPUs the price counts.
	GPUsPerCopy int `json:"gpus_per_copy,omitempty"`
	// PrefillEngines is the prefill engines of a prefill/decode split: 0
	// reads as 1 when pd_link_bytes_per_second is set; one is modelled.
	PrefillEngines int `json:"prefill_engines,omitempty"`
	// PrefillGPUs is the prefill engine's GPUs; with gpus_per_copy on a
	// split it is required.
	PrefillGPUs int `json:"prefill_gpus,omitempty"`
	// HostCache gives every engine a host-memory KV tier (SGLang's HiCache).
	HostCache *SimHostCache `json:"host_cache,omitempty"`
}

// SimHostCache is pinned host RAM kept for KV, per node (each engine gets
// its GPUs' share), and the host-to-GPU copy rate of each GPU.
type SimHostCache struct {
	TiBPerNode float64 `json:"tib_per_node"`
	// BytesPerSecondPerGPU is 0 for the simulator's default (PCIe 5 x16,
	// about 5e10).
	BytesPerSecondPerGPU float64 `json:"bytes_per_second_per_gpu,omitempty"`
}

// PrometheusSpec names a Prometheus server that scrapes the recipe's engines
// and gateway, and the label matchers that pick their series.
type PrometheusSpec struct {
	// URL is the server's base URL, e.g. http://prometheus.monitoring:9090.
	URL string `json:"url"`
	// Selector holds the label matchers, in braces, that pick the recipe's
	// engines and gateway: {namespace="llm",job="vllm",model_name="glm-5.3"}.
	Selector       string `json:"selector,omitempty"`
	transport.Auth `json:",inline"`
}

// DiscoverySpec says how the metrics targets are found.
type DiscoverySpec struct {
	Kubernetes *KubernetesDiscovery `json:"kubernetes,omitempty"`
}

// KubernetesDiscovery finds every pod behind the recipe through its
// EndpointSlices and scrapes each pod, following pods that come and go.
type KubernetesDiscovery struct {
	Namespace string `json:"namespace,omitempty"`
	// Service is the Service whose EndpointSlices list the pods; or
	// Selector, a label selector on the EndpointSlices (app=vllm).
	Service  string `json:"service,omitempty"`
	Selector string `json:"selector,omitempty"`
	// Port is the metrics port: a number, or the EndpointSlice port's name.
	Port string `json:"port"`
	// Path is the metrics path (default /metrics); Scheme http or https.
	Path       string `json:"path,omitempty"`
	Scheme     string `json:"scheme,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
}

// EndpointAuth is what every request to the endpoint carries. Its problems
// are named under "recipe"; EndpointField gives the key its run-file name.
func (r Recipe) EndpointAuth() transport.Auth {
	return transport.Auth{BearerTokenEnv: r.APIKeyEnv, Headers: r.Headers, TLS: r.TLS}
}

// EndpointField renames, in a message about EndpointAuth("recipe"), the
// bearer key's field to the name the run file gives it: recipe.api_key_env.
func EndpointField(msg string) string {
	return strings.ReplaceAll(msg, "recipe.bearer_token_env", "recipe.api_key_env")
}

// Deployer types a recipe's deploy section may name.
const (
	DeployNone       = "none"
	DeployKubernetes = "kubernetes"
	DeployCommand    = "command"
)

// Deploy says how a recipe is deployed, how long it may take to be ready and
// how the previous recipe is restored.
type Deploy struct {
	// Type is none (the endpoint is already serving; the default),
	// kubernetes or command.
	Type string `json:"type,omitempty"`
	// ReadyTimeoutS bounds how long a deploy may take to serve, in seconds
	// (default 1800).
	ReadyTimeoutS float64 `json:"ready_timeout_s,omitempty"`
	// RollbackTimeoutS bounds how long restoring the previous recipe may take,
	// in seconds (default 1800).
	RollbackTimeoutS float64 `json:"rollback_timeout_s,omitempty"`
	// PollS is how often readiness is checked, in seconds (default 5).
	PollS      float64         `json:"poll_s,omitempty"`
	Kubernetes *KubernetesSpec `json:"kubernetes,omitempty"`
	Command    *CommandSpec    `json:"command,omitempty"`
}

// KubernetesSpec is what the kubernetes deployer applies and where.
type KubernetesSpec struct {
	// Manifests are YAML files with one or more objects, applied in order.
	Manifests []string `json:"manifests"`
	// Namespace is given to namespaced objects that name none (default "default").
	Namespace string `json:"namespace,omitempty"`
	// Kubeconfig is the kubeconfig file; empty uses $KUBECONFIG, ~/.kube/config
	// or the in-cluster service account.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context; empty uses the current one.
	Context string `json:"context,omitempty"`
	// Ready maps an object kind to the condition type that means it is ready,
	// adding to or overriding the built-in ones (ModelDeployment ReplicasReady,
	// Deployment and LeaderWorkerSet Available, InferenceService Ready).
	Ready map[string]string `json:"ready,omitempty"`
}

// CommandSpec is the user's own deploy and undeploy commands.
type CommandSpec struct {
	// Deploy is the command (argv, no shell) that puts the recipe up; use
	// ["sh", "-c", "..."] for a shell line.
	Deploy []string `json:"deploy"`
	// Undeploy is the command that puts the previous recipe back.
	Undeploy []string `json:"undeploy"`
	// ReadyURL answers 2xx when the deployment is ready (checked before the
	// endpoint's /v1/models); empty checks only /v1/models.
	ReadyURL string `json:"ready_url,omitempty"`
}

// Load reads a recipe file strictly (unknown fields are errors) and checks
// the fields this package owns; Dir is set to the file's folder.
func Load(path string) (Recipe, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Recipe{}, fmt.Errorf("read recipe file: %w", err)
	}
	r, err := Parse(b, path)
	if err != nil {
		return Recipe{}, err
	}
	r.Dir = filepath.Dir(path)
	return r, nil
}

// Parse decodes a recipe strictly and checks the fields this package owns.
// name (usually the file) is used in errors.
func Parse(b []byte, name string) (Recipe, error) {
	var r Recipe
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return Recipe{}, fmt.Errorf("%s: %v (recipe fields are listed in docs/kubernetes.md)", name, err)
	}
	if r.File != "" {
		return Recipe{}, fmt.Errorf("%s: file: a recipe file cannot point at another recipe file (%q)", name, r.File)
	}
	if err := r.Validate(); err != nil {
		return Recipe{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// Resolve returns the recipe a run file means: r itself, or, when r.File is
// set, the recipe read from that file (relative to base, the run file's
// folder). Setting File and any other field is an error.
func Resolve(r Recipe, base string) (Recipe, error) {
	if r.File == "" {
		if r.Dir == "" {
			r.Dir = base
		}
		return r, nil
	}
	rest := r
	rest.File, rest.Dir = "", ""
	if !isZero(rest) {
		return Recipe{}, fmt.Errorf("recipe.file: %q is set, so the other recipe fields must be empty; put them in the recipe file", r.File)
	}
	return Load(rel(base, r.File))
}

// ParentFile is the parent's recipe file when Parent names one (ends in
// .yaml or .yml), relative paths read from Dir; ok is false when Parent is
// only a name.
func (r Recipe) ParentFile() (path string, ok bool) {
	ext := strings.ToLower(filepath.Ext(r.Parent))
	if ext != ".yaml" && ext != ".yml" {
		return "", false
	}
	return rel(r.Dir, r.Parent), true
}

// Path resolves a path the recipe names (a manifest, say) against Dir.
func (r Recipe) Path(p string) string { return rel(r.Dir, p) }

// Validate checks the fields this package adds to the run file's recipe
// (image, args, copies, router, deploy) and reports every problem at once,
// each naming its field. The core fields are checked by the run file's
// validation.
func (r Recipe) Validate() error {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if r.Copies < 0 {
		bad("copies", "must be >= 0 (0 reads as 1), got %d", r.Copies)
	}
	for i, a := range r.Args {
		if strings.TrimSpace(a) == "" {
			bad(fmt.Sprintf("args[%d]", i), "is empty")
		}
	}
	d := r.Deploy
	for _, t := range []struct {
		field string
		v     float64
	}{{"deploy.ready_timeout_s", d.ReadyTimeoutS}, {"deploy.rollback_timeout_s", d.RollbackTimeoutS}, {"deploy.poll_s", d.PollS}} {
		if t.v < 0 {
			bad(t.field, "must be >= 0 seconds (0 takes the default), got %g", t.v)
		}
	}
	switch d.Type {
	case "", DeployNone:
		if d.Kubernetes != nil || d.Command != nil {
			bad("deploy.type", "is %q but a kubernetes or command section is set; say type: kubernetes or type: command", d.typeName())
		}
	case DeployKubernetes:
		if d.Command != nil {
			bad("deploy.command", "is set but deploy.type is kubernetes")
		}
		k := d.Kubernetes
		if k == nil || len(k.Manifests) == 0 {
			bad("deploy.kubernetes.manifests", "list the YAML files to apply")
			break
		}
		for i, m := range k.Manifests {
			if strings.TrimSpace(m) == "" {
				bad(fmt.Sprintf("deploy.kubernetes.manifests[%d]", i), "is empty")
			}
		}
		for kind, cond := range k.Ready {
			if kind == "" || cond == "" {
				bad("deploy.kubernetes.ready", "maps a kind to a condition type; both must be set, got %q: %q", kind, cond)
			}
		}
	case DeployCommand:
		if d.Kubernetes != nil {
			bad("deploy.kubernetes", "is set but deploy.type is command")
		}
		c := d.Command
		if c == nil || len(c.Deploy) == 0 {
			bad("deploy.command.deploy", "give the command that puts the recipe up, e.g. [\"sh\", \"-c\", \"helm upgrade ...\"]")
		}
		if c == nil || len(c.Undeploy) == 0 {
			bad("deploy.command.undeploy", "give the command that puts the previous recipe back: rollback always runs")
		}
	default:
		bad("deploy.type", "unknown deployer %q (known: none, kubernetes, command)", d.Type)
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return errors.New("invalid recipe:\n  " + strings.Join(errs, "\n  "))
}

func (d Deploy) typeName() string {
	if d.Type == "" {
		return DeployNone
	}
	return d.Type
}

func rel(dir, p string) string {
	if p == "" || filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

func isZero(r Recipe) bool {
	b, _ := yaml.Marshal(r)
	empty, _ := yaml.Marshal(Recipe{})
	return string(b) == string(empty)
}
