package deploy

import (
	"testing"

	"k8s.io/client-go/kubernetes"
)

// RealAPIServer gives the tests in package deploy_test the shared real
// kube-apiserver (skipping as realAPIServer does): its kubeconfig and a
// client.
func RealAPIServer(t *testing.T) (kubeconfig string, client kubernetes.Interface) {
	s := realAPIServer(t)
	return s.kubeconfig, s.client
}

// NewNamespace makes a namespace on it for one test, deleted at the end.
func NewNamespace(t *testing.T, name string) string {
	return realAPIServer(t).namespaceLabelled(t, name, nil)
}
