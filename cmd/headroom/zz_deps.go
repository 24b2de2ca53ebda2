// Blank imports that hold dependencies in go.mod until the packages that use them land.
package main

import (
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "gonum.org/v1/plot"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/dynamic/fake"
	_ "k8s.io/client-go/tools/clientcmd"
)
