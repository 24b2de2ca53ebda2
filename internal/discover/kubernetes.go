// Package discover finds the metrics targets behind a recipe: the /metrics
// URL of every pod that serves it, listed from the Kubernetes
// EndpointSlices of its Service (or of a label selector), so each pod is
// scraped on its own and pods that come and go are followed.
package discover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/headroom-bench/headroom/internal/recipe"
)

// Kubernetes lists the metrics URLs of the pods behind a Service (or a
// label selector on EndpointSlices) in one namespace. Each call to Targets
// lists the EndpointSlices again, so it sees pods as they come and go.
type Kubernetes struct {
	client    kubernetes.Interface
	namespace string
	selector  string // label selector on EndpointSlices
	what      string // "service vllm" or "EndpointSlices labelled app=vllm", for messages
	port      string // a number, or the name of an EndpointSlice port
	path      string
	scheme    string
}

// NewKubernetes reads the recipe's discovery section; namespace is used
// when the section names none (the kubeconfig context's, from Connect).
// Nothing is sent to the cluster until Targets.
func NewKubernetes(client kubernetes.Interface, spec recipe.KubernetesDiscovery, namespace string) (*Kubernetes, error) {
	k := &Kubernetes{client: client, namespace: spec.Namespace, port: spec.Port, path: spec.Path, scheme: spec.Scheme}
	if k.namespace == "" {
		k.namespace = namespace
	}
	if k.namespace == "" {
		k.namespace = metav1.NamespaceDefault
	}
	switch {
	case spec.Service != "" && spec.Selector != "":
		return nil, errors.New("recipe.discovery.kubernetes: give service or selector, not both")
	case spec.Service != "":
		k.selector = discoveryv1.LabelServiceName + "=" + spec.Service
		k.what = "service " + spec.Service
	case spec.Selector != "":
		if _, err := labels.Parse(spec.Selector); err != nil {
			return nil, fmt.Errorf("recipe.discovery.kubernetes.selector: %q: %v (write a label selector such as app=vllm,tier in (engine))", spec.Selector, err)
		}
		k.selector = spec.Selector
		k.what = "EndpointSlices labelled " + spec.Selector
	default:
		return nil, errors.New("recipe.discovery.kubernetes: give service (the Service whose EndpointSlices list the pods) or selector (a label selector on EndpointSlices)")
	}
	if k.port == "" {
		return nil, errors.New("recipe.discovery.kubernetes.port: give the metrics port, a number or the port's name in the EndpointSlices")
	}
	if n, err := strconv.Atoi(k.port); err == nil && (n < 1 || n > 65535) {
		return nil, fmt.Errorf("recipe.discovery.kubernetes.port: %d is not a port", n)
	}
	if k.path == "" {
		k.path = "/metrics"
	}
	if !strings.HasPrefix(k.path, "/") {
		return nil, fmt.Errorf("recipe.discovery.kubernetes.path: must start with /, got %q", k.path)
	}
	if k.scheme == "" {
		k.scheme = "http"
	}
	if k.scheme != "http" && k.scheme != "https" {
		return nil, fmt.Errorf("recipe.discovery.kubernetes.scheme: must be http or https, got %q", k.scheme)
	}
	return k, nil
}

// Connect makes a Kubernetes client from a kubeconfig file and context;
// empty ones use $KUBECONFIG, ~/.kube/config or the in-cluster service
// account, as kubectl does. namespace is the context's namespace ("default"
// when it names none).
func Connect(kubeconfig, kubeContext string) (client kubernetes.Interface, namespace string, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client config: %v; set recipe.discovery.kubernetes.kubeconfig or $KUBECONFIG, or run in a pod with a service account", err)
	}
	cfg.UserAgent = "headroom"
	if namespace, _, err = cc.Namespace(); err != nil {
		return nil, "", fmt.Errorf("kubernetes namespace of the context: %v; set recipe.discovery.kubernetes.namespace", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %v", err)
	}
	return cs, namespace, nil
}

// String says where targets are found, for logs and errors.
func (k *Kubernetes) String() string {
	return fmt.Sprintf("the pods of %s in namespace %s, port %s, %s", k.what, k.namespace, k.port, k.path)
}

// Targets lists the EndpointSlices now and returns the metrics URL of every
// endpoint that serves (ready, or terminating while still serving, so a pod
// draining its last requests is still read), sorted, each once. It fails
// when nothing serves: a run must not go on reading no engine.
func (k *Kubernetes) Targets(ctx context.Context) ([]string, error) {
	list, err := k.client.DiscoveryV1().EndpointSlices(k.namespace).List(ctx, metav1.ListOptions{LabelSelector: k.selector})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("listing the EndpointSlices of %s in namespace %s: %v; headroom needs get, list and watch on endpointslices.discovery.k8s.io there (see deploy/rbac.yaml)", k.what, k.namespace, err)
		}
		return nil, fmt.Errorf("listing the EndpointSlices of %s in namespace %s: %w", k.what, k.namespace, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no EndpointSlices for %s in namespace %s: check recipe.discovery.kubernetes (kubectl get endpointslices -n %s -l %s)", k.what, k.namespace, k.namespace, k.selector)
	}
	var out []string
	idle, withPort := 0, 0
	portNames := map[string]bool{}
	for _, slice := range list.Items {
		port, ok := k.portOf(slice, portNames)
		if !ok {
			continue
		}
		withPort++
		for _, ep := range slice.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			if !serving(ep.Conditions) {
				idle++
				continue
			}
			// The addresses of one endpoint are one pod's: the first will do.
			u := url.URL{Scheme: k.scheme, Host: net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))), Path: k.path}
			out = append(out, u.String())
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	switch {
	case len(out) > 0:
		return out, nil
	case withPort == 0:
		named := "they name none"
		if len(portNames) > 0 {
			named = "they name " + strings.Join(sortedKeys(portNames), ", ")
		}
		return nil, fmt.Errorf("the EndpointSlices of %s in namespace %s have no port named %q (%s): set recipe.discovery.kubernetes.port to one of them, or to the metrics port's number", k.what, k.namespace, k.port, named)
	}
	return nil, fmt.Errorf("%s in namespace %s has no serving endpoints (%d not ready): is the recipe up?", k.what, k.namespace, idle)
}

// portOf is the metrics port for the endpoints of one slice: the number
// given, or the slice's port of that name. names collects the port names
// seen, for the error when none matches.
func (k *Kubernetes) portOf(slice discoveryv1.EndpointSlice, names map[string]bool) (int32, bool) {
	if n, err := strconv.Atoi(k.port); err == nil {
		return int32(n), true
	}
	for _, p := range slice.Ports {
		if p.Name != nil && *p.Name == k.port && p.Port != nil {
			return *p.Port, true
		}
		if p.Name != nil && *p.Name != "" {
			names[*p.Name] = true
		}
	}
	return 0, false
}

// serving reports whether an endpoint takes requests: ready (unset reads
// as ready), or still serving while it terminates.
func serving(c discoveryv1.EndpointConditions) bool {
	if c.Ready == nil || *c.Ready {
		return true
	}
	return c.Serving != nil && *c.Serving
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
