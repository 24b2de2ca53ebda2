package main
import (
 _ "github.com/spf13/cobra"
 _ "sigs.k8s.io/yaml"
 _ "github.com/prometheus/common/expfmt"
 _ "github.com/prometheus/client_model/go"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/prometheus/client_golang/prometheus/promhttp"
 _ "gonum.org/v1/gonum/stat"
)
func main(){}
