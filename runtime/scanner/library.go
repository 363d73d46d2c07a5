package scanner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// LibraryConfig configures NewLibrary.
type LibraryConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = store.LibraryKeepInterval
	Logger   *slog.Logger  // nil = discard
}

// Library records, every interval, that this process uses its version of
// the Functions library, and deletes the libraries of versions nobody in
// the key prefix has used for store.LibraryIdleAfter, such as those of a
// release a rolling upgrade replaced (store.Store.KeepLibrary). One call
// per tick, not per partition.
type Library struct{ *runner }

// NewLibrary returns a stopped library scanner.
func NewLibrary(cfg LibraryConfig) (*Library, error) {
	cfg.Interval = cmp.Or(cfg.Interval, store.LibraryKeepInterval)
	if err := checkCommon("library", cfg.Store, cfg.Interval, 1); err != nil {
		return nil, err
	}
	if cfg.Interval > store.LibraryIdleAfter/2 {
		// Other processes would find this version idle between two records
		// and delete its library, which it would then load again and again.
		return nil, fmt.Errorf("scanner: library: Config.Interval = %s, want at most %s (half of store.LibraryIdleAfter)",
			cfg.Interval, store.LibraryIdleAfter/2)
	}
	r := newRunner("library", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, _ int) (store.ScanResult, error) {
			n, err := cfg.Store.KeepLibrary(ctx)
			return store.ScanResult{Processed: n}, err
		})
	r.parts = func() int { return 1 }
	return &Library{r}, nil
}
