package dashboard_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
)

// An execution whose input is over the 256 KiB a page shows, with a byte
// that is not UTF-8 near its start: the page shows the first 256 KiB (the
// cut backs off only over a character it would split; it dropped bytes
// until all it kept was valid UTF-8, and showed only the bytes before the
// bad one).
func TestExecutionPageInvalidUTF8(t *testing.T) {
	env := servertest.Start(t)
	b := newBrowser(t, env)
	body := `{"namespace":"default","lane":"default","kind":"review.utf8","input":{"a":"x` + "\xff" + `","pad":"` +
		strings.Repeat("p", 300<<10) + `"}}`
	res := env.Do(t, http.MethodPost, "/v1/executions", nil, body)
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %.300s", res.Status, res.Body)
	}
	var x struct {
		Execution struct {
			ID string `json:"id"`
		} `json:"execution"`
	}
	if err := json.Unmarshal([]byte(res.Body), &x); err != nil || x.Execution.ID == "" {
		t.Fatalf("create answer %.200s: %v", res.Body, err)
	}
	p := b.get("/ui/executions/" + x.Execution.ID)
	if p.status != http.StatusOK || !strings.Contains(p.body, "<h2>Input</h2>") {
		t.Fatalf("status %d; body %.300s", p.status, p.body)
	}
	if n := strings.Count(p.body, "pppp"); n < 200<<10/4 {
		i := strings.Index(p.body, "<h2>Input</h2>")
		t.Errorf("the page shows %d bytes of the input's padding, want about 256 KiB of it; the input section: %q",
			4*n, p.body[i:min(len(p.body), i+160)])
	}
}
