package importrules

import "testing"

// deliveryImports are what pkg/delivery may import besides the standard
// library: it answers who delivers a Cluster for the engine, the view, the
// authorizer and the agent alike, so it stays as light as the API types;
// who holds a bucket comes in through its Holders interface, not by
// importing pkg/sharding (docs/design.md#pull-delivery).
var deliveryImports = []string{module + "/pkg/apis/...", "k8s.io/apimachinery/..."}

func TestDeliveryIsLight(t *testing.T) {
	imports := goList(t, "", `{{join .Imports "\n"}}`, module+"/pkg/delivery")
	std := map[string]bool{}
	for _, p := range goList(t, "", "{{if .Standard}}{{.ImportPath}}{{end}}", imports...) {
		std[p] = true
	}
	for _, p := range imports {
		if !std[p] && !matchesAny(p, deliveryImports) {
			t.Errorf("pkg/delivery imports %s; it may import only the standard library and %v", p, deliveryImports)
		}
	}
}
