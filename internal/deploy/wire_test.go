package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// apiServer is a tiny stand-in for a Kubernetes API server over real HTTP:
// discovery for apps/v1, and GET, PATCH (server-side apply only) and DELETE
// of one Deployment, which it reports ready at once. It records the
// requests, so the test sees what a real cluster would receive. It is also
// the gateway: /v1/models lists the model while the Deployment exists.
type apiServer struct {
	mu       sync.Mutex
	obj      map[string]any
	requests []string // "METHOD path?query content-type"
}

const deployPath = "/apis/apps/v1/namespaces/serving/deployments/vllm"

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Content-Type"))
	w.Header().Set("Content-Type", "application/json")
	notFound := func() {
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
	}
	switch {
	case r.URL.Path == "/apis/apps/v1":
		json.NewEncoder(w).Encode(map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
			"resources": []any{
				map[string]any{"name": "deployments", "singularName": "deployment", "namespaced": true, "kind": "Deployment", "verbs": []string{"get", "patch"}},
				map[string]any{"name": "deployments/status", "singularName": "", "namespaced": true, "kind": "Deployment", "verbs": []string{"get"}},
			}})
	case r.URL.Path == "/v1/models":
		if s.obj == nil {
			http.Error(w, "no upstream", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"data":[{"id":"glm"}]}`))
	case r.URL.Path == deployPath && r.Method == http.MethodGet:
		if s.obj == nil {
			notFound()
			return
		}
		json.NewEncoder(w).Encode(s.obj)
	case r.URL.Path == deployPath && r.Method == http.MethodPatch:
		var o map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &o); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o["metadata"].(map[string]any)["generation"] = 1
		o["status"] = map[string]any{"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1,
			"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}
		s.obj = o
		json.NewEncoder(w).Encode(o)
	case r.URL.Path == deployPath && r.Method == http.MethodDelete:
		if s.obj == nil {
			notFound()
			return
		}
		s.obj = nil
		json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"})
	default:
		notFound()
	}
}

// TestKubernetesOverHTTP runs Connect, discovery, Deploy and Rollback with
// client-go's real REST client against apiServer: the apply goes out as a
// server-side apply PATCH with field manager headroom and force, and the
// rollback deletes the object that did not exist before.
func TestKubernetesOverHTTP(t *testing.T) {
	api := &apiServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: secret}}]
contexts: [{name: test, context: {cluster: c, user: u, namespace: serving}}]
current-context: test
`), 0o600)
	client, mapper, err := Connect(kubeconfig, "test")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeManifests([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec: {replicas: 1}\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKubernetes(KubernetesConfig{Client: client, Mapper: mapper, Objects: objs, Namespace: "serving",
		Options: Options{Endpoint: srv.URL, Model: "glm", Poll: 10 * time.Millisecond, ReadyTimeout: 5 * time.Second, HTTP: srv.Client()}})
	if err != nil {
		t.Fatal(err)
	}
	err = Within(context.Background(), k, 5*time.Second, func(context.Context) error {
		api.mu.Lock()
		defer api.mu.Unlock()
		if api.obj == nil {
			t.Error("the Deployment is not there during the run")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Within: %v", err)
	}
	api.mu.Lock()
	gone := api.obj == nil
	log := strings.Join(api.requests, "\n")
	api.mu.Unlock()
	if !gone {
		t.Error("the Deployment, absent before the run, is still there after rollback")
	}
	for _, want := range []string{
		"GET /apis/apps/v1?",
		"PATCH " + deployPath + "?fieldManager=headroom&force=true application/apply-patch+yaml",
		"DELETE " + deployPath,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("no request %q among:\n%s", want, log)
		}
	}
	// A kind the cluster does not serve fails in discovery, before any apply.
	if _, _, err := mapper.Resource(context.Background(), objs[0].GroupVersionKind().GroupVersion().WithKind("LeaderWorkerSet")); err == nil ||
		!strings.Contains(err.Error(), "no kind LeaderWorkerSet") {
		t.Errorf("unknown kind: %v", err)
	}
	if _, _, err := mapper.Resource(context.Background(), objs[0].GroupVersionKind().GroupKind().WithVersion("v9")); err == nil ||
		!strings.Contains(err.Error(), "CRD") {
		t.Errorf("unknown group version: %v", err)
	}
}
