package worker

import "time"

// SetRequestSlack sets what bounds w's reports, hand-backs and upstream
// reads beyond the time their bodies take (requestSlack, 15 s), so that a
// test of those bounds need not wait for them. Call it before Run.
func SetRequestSlack(w *Worker, d time.Duration) { w.slack = d }
