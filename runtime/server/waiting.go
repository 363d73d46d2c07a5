package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/flowfabric/ff/runtime/store"
)

// waitHints says why executions that wait for a worker may wait for
// ever: no worker is connected to their namespace, or none of those
// connected takes their lane. Reads of one execution or one run use it
// (a listing does not: one registry read per namespace is fine for one
// read, not for a page); it reads each namespace's registry once.
type waitHints struct {
	st   *store.Store
	byNS map[string][]store.WorkerInfo
}

func newWaitHints(st *store.Store) *waitHints {
	return &waitHints{st: st, byNS: map[string][]store.WorkerInfo{}}
}

// hint returns why no worker claims an execution waiting in namespace ns
// and lane, or "" when a connected worker takes that lane (it may still
// lack the handler kind), or when the registry cannot be read: a hint is
// no reason to fail the read it is part of.
func (h *waitHints) hint(ctx context.Context, ns, lane string) string {
	ws, ok := h.byNS[ns]
	if !ok {
		var err error
		if ws, err = h.st.Workers(ctx, ns); err != nil {
			return ""
		}
		h.byNS[ns] = ws
	}
	if len(ws) == 0 {
		return fmt.Sprintf("no worker is connected to namespace %s", ns)
	}
	var lanes []string
	for _, w := range ws {
		if slices.Contains(w.Lanes, lane) {
			return ""
		}
		lanes = append(lanes, w.Lanes...)
	}
	slices.Sort(lanes)
	return fmt.Sprintf("no connected worker of namespace %s takes lane %s (they take %s)", ns, lane, strings.Join(slices.Compact(lanes), ", "))
}
