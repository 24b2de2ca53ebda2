package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Discovery is a Mapper that asks the API server which resource serves a
// kind (GET /api/v1 or /apis/<group>/<version>), caching each group version.
type Discovery struct {
	client rest.Interface

	mu    sync.Mutex
	cache map[schema.GroupVersion]*metav1.APIResourceList
}

// NewDiscovery makes a Discovery for the cluster cfg points at.
func NewDiscovery(cfg *rest.Config) (*Discovery, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = nil
	c.APIPath = ""
	c.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes discovery client: %v", err)
	}
	return &Discovery{client: client, cache: map[schema.GroupVersion]*metav1.APIResourceList{}}, nil
}

// Resource finds the resource that serves gvk and whether it is namespaced.
func (d *Discovery) Resource(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	gv := gvk.GroupVersion()
	d.mu.Lock()
	list, ok := d.cache[gv]
	d.mu.Unlock()
	if !ok {
		path := "/apis/" + gv.Group + "/" + gv.Version
		if gv.Group == "" {
			path = "/api/" + gv.Version
		}
		raw, err := d.client.Get().AbsPath(path).Do(ctx).Raw()
		if err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("the cluster does not serve %s (GET %s: %v); is its CRD installed?", gv, path, err)
		}
		list = &metav1.APIResourceList{}
		if err := json.Unmarshal(raw, list); err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("GET %s: not an API resource list: %v", path, err)
		}
		d.mu.Lock()
		d.cache[gv] = list
		d.mu.Unlock()
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			return gv.WithResource(r.Name), r.Namespaced, nil
		}
	}
	return schema.GroupVersionResource{}, false, fmt.Errorf("the cluster serves %s but no kind %s in it; is the CRD's version right?", gv, gvk.Kind)
}
