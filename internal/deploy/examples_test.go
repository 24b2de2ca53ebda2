package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/recipe"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The kinds below are not in k8s.io/api and their Go modules are not in
// the registries here, so each is mirrored from its CRD: the fields of its
// schema (decoded strictly, so a field the CRD lacks is an error, as a
// structural schema would drop it), its pod templates as k8s.io/api
// types, and its enums and validation rules in check.

// leaderWorkerSet mirrors leaderworkerset.x-k8s.io/v1 LeaderWorkerSet
// (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go).
type leaderWorkerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Replicas             *int32 `json:"replicas,omitempty"`
		LeaderWorkerTemplate struct {
			LeaderTemplate *corev1.PodTemplateSpec `json:"leaderTemplate,omitempty"`
			WorkerTemplate corev1.PodTemplateSpec  `json:"workerTemplate"`
			Size           *int32                  `json:"size,omitempty"`
			RestartPolicy  string                  `json:"restartPolicy,omitempty"`
			SubGroupPolicy *struct {
				Type         *string `json:"subGroupPolicyType,omitempty"`
				SubGroupSize *int32  `json:"subGroupSize,omitempty"`
			} `json:"subGroupPolicy,omitempty"`
			VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
		} `json:"leaderWorkerTemplate"`
		RolloutStrategy *struct {
			Type                       string `json:"type"`
			RollingUpdateConfiguration *struct {
				Partition      *int32             `json:"partition,omitempty"`
				MaxUnavailable intstr.IntOrString `json:"maxUnavailable,omitempty"`
				MaxSurge       intstr.IntOrString `json:"maxSurge,omitempty"`
			} `json:"rollingUpdateConfiguration,omitempty"`
		} `json:"rolloutStrategy,omitempty"`
		StartupPolicy string `json:"startupPolicy,omitempty"`
		NetworkConfig *struct {
			SubdomainPolicy *string `json:"subdomainPolicy"`
		} `json:"networkConfig,omitempty"`
	} `json:"spec"`
}

func (l *leaderWorkerSet) check() error {
	s := l.Spec
	t := s.LeaderWorkerTemplate
	switch {
	case !oneOf(t.RestartPolicy, "", "Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"):
		return fmt.Errorf("restartPolicy %q", t.RestartPolicy)
	case !oneOf(s.StartupPolicy, "", "LeaderCreated", "LeaderReady"):
		return fmt.Errorf("startupPolicy %q", s.StartupPolicy)
	case s.RolloutStrategy != nil && s.RolloutStrategy.Type != "RollingUpdate":
		return fmt.Errorf("rolloutStrategy.type %q", s.RolloutStrategy.Type)
	case t.Size != nil && *t.Size < 1:
		return fmt.Errorf("size %d", *t.Size)
	case len(t.WorkerTemplate.Spec.Containers) == 0:
		return fmt.Errorf("workerTemplate has no containers")
	}
	return nil
}

// servingContainers are the LeaderWorkerSet's serving containers: the
// leader's (it serves the API), else the workers'.
func (l *leaderWorkerSet) servingContainers() []corev1.Container {
	if t := l.Spec.LeaderWorkerTemplate.LeaderTemplate; t != nil {
		return t.Spec.Containers
	}
	return l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers
}

// inferenceService mirrors serving.kserve.io/v1beta1 InferenceService's
// predictor (kserve/kserve pkg/apis/serving/v1beta1 predictor.go,
// predictor_model.go and component.go): a model, or a custom PodSpec,
// with the component's scaling fields.
type inferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Predictor struct {
			Model *struct {
				ModelFormat struct {
					Name    string  `json:"name"`
					Version *string `json:"version,omitempty"`
				} `json:"modelFormat"`
				Runtime          *string `json:"runtime,omitempty"`
				StorageURI       *string `json:"storageUri,omitempty"`
				RuntimeVersion   *string `json:"runtimeVersion,omitempty"`
				ProtocolVersion  *string `json:"protocolVersion,omitempty"`
				corev1.Container `json:",inline"`
			} `json:"model,omitempty"`
			WorkerSpec *struct {
				corev1.PodSpec       `json:",inline"`
				PipelineParallelSize *int `json:"pipelineParallelSize,omitempty"`
				TensorParallelSize   *int `json:"tensorParallelSize,omitempty"`
			} `json:"workerSpec,omitempty"`
			corev1.PodSpec       `json:",inline"`
			MinReplicas          *int                       `json:"minReplicas,omitempty"`
			MaxReplicas          int                        `json:"maxReplicas,omitempty"`
			ScaleTarget          *int                       `json:"scaleTarget,omitempty"`
			ScaleMetric          *string                    `json:"scaleMetric,omitempty"`
			ContainerConcurrency *int64                     `json:"containerConcurrency,omitempty"`
			TimeoutSeconds       *int64                     `json:"timeout,omitempty"`
			CanaryTrafficPercent *int64                     `json:"canaryTrafficPercent,omitempty"`
			Labels               map[string]string          `json:"labels,omitempty"`
			Annotations          map[string]string          `json:"annotations,omitempty"`
			DeploymentStrategy   *appsv1.DeploymentStrategy `json:"deploymentStrategy,omitempty"`
		} `json:"predictor"`
	} `json:"spec"`
}

func (s *inferenceService) check() error {
	p := s.Spec.Predictor
	switch {
	case (p.Model != nil) == (len(p.Containers) > 0):
		return fmt.Errorf("the predictor needs exactly one of model and containers")
	case p.ScaleMetric != nil && !oneOf(*p.ScaleMetric, "cpu", "memory", "concurrency", "rps"):
		return fmt.Errorf("scaleMetric %q", *p.ScaleMetric)
	case p.MinReplicas != nil && p.MaxReplicas != 0 && *p.MinReplicas > p.MaxReplicas:
		return fmt.Errorf("minReplicas %d above maxReplicas %d", *p.MinReplicas, p.MaxReplicas)
	case !oneOf(s.Annotations["serving.kserve.io/deploymentMode"], "", "RawDeployment", "Serverless", "ModelMesh"):
		return fmt.Errorf("deploymentMode %q", s.Annotations["serving.kserve.io/deploymentMode"])
	}
	return nil
}

func (s *inferenceService) servingContainers() []corev1.Container {
	if m := s.Spec.Predictor.Model; m != nil {
		return []corev1.Container{m.Container}
	}
	for _, c := range s.Spec.Predictor.Containers {
		if c.Name == "kserve-container" {
			return []corev1.Container{c}
		}
	}
	return s.Spec.Predictor.Containers
}

// modelDeployment mirrors modelplane.ai/v1alpha1 ModelDeployment
// (modelplaneai/modelplane apis/modeldeployments/definition.yaml at
// 020c6aa645da11124f5e0b64c3b9423970a933dc): a curated pod template per
// member, with the definition's CEL rules in check.
type modelDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Replicas int `json:"replicas"`
		Template struct {
			Metadata *struct {
				Labels map[string]string `json:"labels,omitempty"`
			} `json:"metadata,omitempty"`
			Spec struct {
				ClusterSelector *struct {
					MatchLabels map[string]string `json:"matchLabels,omitempty"`
				} `json:"clusterSelector,omitempty"`
				ModelCacheRef *struct {
					Name string `json:"name"`
				} `json:"modelCacheRef,omitempty"`
				Serving *struct {
					Mode string `json:"mode"`
				} `json:"serving,omitempty"`
				Tolerations []struct {
					Key      string `json:"key,omitempty"`
					Operator string `json:"operator,omitempty"`
					Value    string `json:"value,omitempty"`
					Effect   string `json:"effect,omitempty"`
				} `json:"tolerations,omitempty"`
				Engines []mpEngine `json:"engines"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type mpEngine struct {
	Name    string     `json:"name"`
	Copies  *int       `json:"copies,omitempty"`
	Phase   string     `json:"phase,omitempty"`
	Members []mpMember `json:"members"`
}

type mpMember struct {
	Role         string `json:"role,omitempty"`
	NodeSelector *struct {
		Devices []struct {
			Name      string `json:"name"`
			Count     *int   `json:"count,omitempty"`
			Selectors []struct {
				CEL string `json:"cel,omitempty"`
			} `json:"selectors"`
		} `json:"devices"`
	} `json:"nodeSelector,omitempty"`
	Worker *struct {
		Nodes int `json:"nodes"`
	} `json:"worker,omitempty"`
	Template struct {
		Metadata *struct {
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"metadata,omitempty"`
		Spec struct {
			Containers []struct {
				Name    string          `json:"name"`
				Image   string          `json:"image"`
				Command []string        `json:"command,omitempty"`
				Args    []string        `json:"args,omitempty"`
				Env     []corev1.EnvVar `json:"env,omitempty"`
			} `json:"containers"`
			ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
		} `json:"spec"`
	} `json:"template"`
}

func (m *modelDeployment) check() error {
	s := m.Spec.Template.Spec
	mode := "Unified"
	if s.Serving != nil {
		mode = s.Serving.Mode
	}
	switch {
	case m.Spec.Replicas < 1 || m.Spec.Replicas > 10:
		return fmt.Errorf("replicas %d: 1 to 10", m.Spec.Replicas)
	case !oneOf(mode, "Unified", "PrefillDecode"):
		return fmt.Errorf("serving.mode %q", mode)
	case len(s.Engines) < 1 || len(s.Engines) > 8:
		return fmt.Errorf("%d engines: 1 to 8", len(s.Engines))
	case mode == "PrefillDecode" && len(s.Engines) != 2:
		return fmt.Errorf("PrefillDecode needs two engines")
	}
	multiNode := false
	for _, e := range s.Engines {
		if e.Phase != "" && mode != "PrefillDecode" {
			return fmt.Errorf("engine %s: phase is only for PrefillDecode", e.Name)
		}
		roles := map[string]int{}
		claims := false
		for _, mb := range e.Members {
			role := mb.Role
			if role == "" {
				role = "Standalone"
			}
			if !oneOf(role, "Standalone", "Leader", "Worker") {
				return fmt.Errorf("engine %s: role %q", e.Name, mb.Role)
			}
			roles[role]++
			if mb.Worker != nil && role != "Worker" {
				return fmt.Errorf("engine %s: worker is only for a Worker member", e.Name)
			}
			if mb.NodeSelector != nil {
				claims = true
				for _, d := range mb.NodeSelector.Devices {
					if len(d.Selectors) == 0 || d.Selectors[0].CEL == "" {
						return fmt.Errorf("engine %s: device %s has no selector", e.Name, d.Name)
					}
				}
			}
			if c := mb.Template.Spec.Containers; len(c) != 1 || c[0].Name != "engine" || c[0].Image == "" {
				return fmt.Errorf("engine %s: a member needs one container, named engine, with an image", e.Name)
			}
		}
		standalone := len(e.Members) == 1 && roles["Standalone"] == 1
		gang := roles["Leader"] == 1 && roles["Worker"] >= 1 && roles["Standalone"] == 0
		if !standalone && !gang {
			return fmt.Errorf("engine %s: one Standalone member, or one Leader and Workers", e.Name)
		}
		if !claims {
			return fmt.Errorf("engine %s: no member carries a nodeSelector, so it gets no GPU", e.Name)
		}
		multiNode = multiNode || gang
	}
	if multiNode && s.ModelCacheRef == nil {
		return fmt.Errorf("a multi-node engine needs modelCacheRef")
	}
	return nil
}

func (m *modelDeployment) servingContainers() []corev1.Container {
	var out []corev1.Container
	for _, e := range m.Spec.Template.Spec.Engines {
		for _, mb := range e.Members {
			if mb.Role == "Worker" {
				continue
			}
			for _, c := range mb.Template.Spec.Containers {
				out = append(out, corev1.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args})
			}
		}
	}
	return out
}

// serviceMonitor and podMonitor mirror the fields the chart sets of
// monitoring.coreos.com/v1 (prometheus-operator pkg/apis/monitoring/v1).
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *namespaceSelector   `json:"namespaceSelector,omitempty"`
		Endpoints         []monitorEndpoint    `json:"endpoints"`
	} `json:"spec"`
}

type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		NamespaceSelector   *namespaceSelector   `json:"namespaceSelector,omitempty"`
		PodMetricsEndpoints []monitorEndpoint    `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type namespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

type monitorEndpoint struct {
	Port     string `json:"port,omitempty"`
	Path     string `json:"path,omitempty"`
	Interval string `json:"interval,omitempty"`
	Scheme   string `json:"scheme,omitempty"`
}

func oneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

// flags reads an engine's command line as flag -> value ("" for a bare
// flag), from argv and from the words of any shell line in it.
func flags(tokens []string) map[string]string {
	var words []string
	for _, tok := range tokens {
		words = append(words, strings.Fields(strings.TrimSuffix(tok, ";"))...)
	}
	out := map[string]string{}
	for i := 0; i < len(words); i++ {
		w := strings.TrimSuffix(words[i], ";")
		if !strings.HasPrefix(w, "--") {
			continue
		}
		if k, v, ok := strings.Cut(w, "="); ok {
			out[k] = v
			continue
		}
		out[w] = ""
		if i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
			out[w] = strings.TrimSuffix(words[i+1], ";")
			i++
		}
	}
	return out
}

// servingContainersOf gives the engine containers of a recipe object, or
// nil for the kinds that hold none (Services, ConfigMaps).
func servingContainersOf(o typedDoc) ([]corev1.Container, error) {
	switch x := o.obj.(type) {
	case *appsv1.Deployment:
		return x.Spec.Template.Spec.Containers, nil
	case *leaderWorkerSet:
		return x.servingContainers(), x.check()
	case *inferenceService:
		return x.servingContainers(), x.check()
	case *modelDeployment:
		return x.servingContainers(), x.check()
	}
	return nil, nil
}

// checkRecipeManifests decodes a recipe's manifests strictly, checks each
// custom kind's rules, and checks the engine container runs the recipe's
// image with every one of its flags; it returns the kinds it found.
func checkRecipeManifests(r recipe.Recipe) ([]string, error) {
	var kinds []string
	want := flags(r.Args)
	for _, m := range r.Deploy.Kubernetes.Manifests {
		p := r.Path(m)
		if _, err := ReadManifests(p); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		objs, err := decodeStrict(p, b)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			kinds = append(kinds, o.kind)
			cs, err := servingContainersOf(o)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %v", p, o.kind, o.name, err)
			}
			if len(cs) == 0 {
				continue
			}
			c := cs[0]
			if r.Image != "" && c.Image != r.Image {
				return nil, fmt.Errorf("%s: %s %s runs %s, the recipe says %s", p, o.kind, o.name, c.Image, r.Image)
			}
			got := flags(append(append([]string{}, c.Command...), c.Args...))
			for f, v := range want {
				if gv, ok := got[f]; !ok || gv != v {
					return nil, fmt.Errorf("%s: %s %s: the recipe's %s %s is not on the engine's command line (%v)", p, o.kind, o.name, f, v, got)
				}
			}
		}
	}
	return kinds, nil
}

// TestExampleManifests: every manifest an example recipe names exists,
// decodes strictly, and runs what the recipe says; between them the
// examples deploy vLLM as a Deployment, a multi-node LeaderWorkerSet, a
// KServe InferenceService and a Modelplane ModelDeployment.
func TestExampleManifests(t *testing.T) {
	files, err := filepath.Glob("../../examples/recipes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example recipes: %v", err)
	}
	seen := map[string]string{}
	for _, f := range files {
		r, err := recipe.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if r.Deploy.Kubernetes == nil {
			continue
		}
		kinds, err := checkRecipeManifests(r)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		for _, k := range kinds {
			seen[k] = filepath.Base(f)
		}
	}
	for _, want := range []string{"Deployment", "LeaderWorkerSet", "InferenceService", "ModelDeployment"} {
		if seen[want] == "" {
			t.Errorf("no example recipe deploys a %s", want)
		}
	}
}

// TestExampleManifestChecksCatch: the checks above fail on the mistakes
// they are there for.
func TestExampleManifestChecksCatch(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("../../examples/manifests", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r3, err := recipe.Load("../../examples/recipes/3-vllm-one-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, old, new string
		change               func(*recipe.Recipe)
		err                  string
	}{
		// A field the LeaderWorkerSet CRD does not have (a typo).
		{"lws typo", "0-vllm.lws.yaml", "    restartPolicy: RecreateGroupOnPodRestart", "    restartPolicy: RecreateGroupOnPodRestart\n    sise: 2", nil, "unknown field"},
		// An enum the CRD refuses.
		{"lws enum", "0-vllm.lws.yaml", "startupPolicy: LeaderCreated", "startupPolicy: WhenReady", nil, "startupPolicy"},
		// Modelplane's engine container must be named engine.
		{"modelplane container", "5-modelplane.md.yaml", "- name: engine", "- name: vllm-engine", nil, "named engine"},
		// A pod spec field k8s.io/api does not know, inside KServe's predictor.
		{"kserve pod field", "4-kserve.isvc.yaml", "    volumes:", "    volumez:", nil, "unknown field"},
		// The recipe and its manifest drift apart.
		{"flag drift", "3-vllm-one-node.deployment.yaml", "", "", func(r *recipe.Recipe) { r.Args = append(r.Args, "--max-num-seqs", "256") }, "--max-num-seqs 256 is not on the engine's command line"},
		{"image drift", "3-vllm-one-node.deployment.yaml", "", "", func(r *recipe.Recipe) { r.Image = "vllm/vllm-openai:v0.12.0" }, "the recipe says vllm/vllm-openai:v0.12.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := read(c.file)
			if c.old != "" {
				if !strings.Contains(body, c.old) {
					t.Fatalf("%s no longer holds %q", c.file, c.old)
				}
				body = strings.Replace(body, c.old, c.new, 1)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, c.file), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			r := r3
			r.Args = slices.Clone(r3.Args)
			r.Dir = dir
			r.Deploy.Kubernetes = &recipe.KubernetesSpec{Manifests: []string{c.file}}
			r.Image, r.Args = "", nil // image and flags are the drift cases' alone
			if c.change != nil {
				r.Image, r.Args = r3.Image, slices.Clone(r3.Args)
				c.change(&r)
			}
			_, err := checkRecipeManifests(r)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
	// The mirror types decode what they mirror: a strict decode of the
	// shipped Modelplane manifest keeps its device selectors.
	var md modelDeployment
	if err := yaml.UnmarshalStrict([]byte(read("5-modelplane.md.yaml")), &md); err != nil || len(md.Spec.Template.Spec.Engines[0].Members[0].NodeSelector.Devices[0].Selectors) != 2 {
		t.Errorf("ModelDeployment decoded as %+v (%v)", md.Spec, err)
	}
}
