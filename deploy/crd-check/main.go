// crd-check decodes every ServiceMonitor in the YAML files it is given into
// the Prometheus Operator's own Go type (monitoring.coreos.com/v1), strictly:
// an unknown field or a value of the wrong type is an error. deploy/validate
// runs it; the Kubernetes Python client has no model for the operator's CRDs.
package main

import (
	"bytes"
	"fmt"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	failed := false
	for _, path := range os.Args[1:] {
		text, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, doc := range bytes.Split(text, []byte("\n---")) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil || head.Kind != "ServiceMonitor" {
				continue
			}
			var sm monitoringv1.ServiceMonitor
			if err := yaml.UnmarshalStrict(doc, &sm); err != nil {
				fmt.Fprintf(os.Stderr, "%s: ServiceMonitor: %v\n", path, err)
				failed = true
				continue
			}
			if head.APIVersion != monitoringv1.SchemeGroupVersion.String() {
				fmt.Fprintf(os.Stderr, "%s: ServiceMonitor/%s: apiVersion %s, not %s\n",
					path, sm.Name, head.APIVersion, monitoringv1.SchemeGroupVersion)
				failed = true
				continue
			}
			fmt.Printf("ServiceMonitor/%s\n", sm.Name)
		}
	}
	if failed {
		os.Exit(1)
	}
}
