package flows

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/worker"
)

func TestWorkerConfigs(t *testing.T) {
	got := WorkerConfigs(worker.Config{URL: "http://ffrun", Name: "demo", Capabilities: []string{"linux"}, Concurrency: 4})
	type summary struct {
		Name, Namespace     string
		Lanes, Capabilities []string
		Concurrency         int
	}
	var sums []summary
	for _, c := range got {
		if c.URL != "http://ffrun" {
			t.Errorf("%s: URL %q not kept", c.Namespace, c.URL)
		}
		sums = append(sums, summary{c.Name, c.Namespace, c.Lanes, c.Capabilities, c.Concurrency})
	}
	want := []summary{
		{"demo-etl", "etl", []string{"batch"}, []string{"linux", "warehouse"}, 4},
		{"demo-llm", "llm", []string{"llm"}, []string{"gpu-large", "linux", "llm"}, 4},
		{"demo-media", "media", []string{"default", "gpu"}, []string{"cuda-12", "gpu", "linux"}, 4},
		{"demo-shop", "shop", []string{"orders"}, []string{"linux", "warehouse-eu"}, 4},
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Fatalf("configs (-want +got):\n%s", diff)
	}
}

func TestPlansAreEveryFlow(t *testing.T) {
	var names []string
	for _, p := range Plans() {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"ask", "fulfil_order", "nightly_etl", "publish"}, names); diff != "" {
		t.Fatalf("plans (-want +got):\n%s", diff)
	}
}
