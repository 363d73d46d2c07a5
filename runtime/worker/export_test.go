package worker

import "time"

// SetRequestSlack sets what bounds w's reports, hand-backs and upstream
// reads beyond the time their bodies take (requestSlack, 15 s), so that a
// test of those bounds need not wait for them. Call it before Run.
func SetRequestSlack(w *Worker, d time.Duration) { w.slack = d }

// SetRequestRate sets the slowest uplink w gives a request time for, in
// bytes a second (reportRateMin, 128 KiB/s), so that a test of a bound
// on a large body need not wait for it. Call it before Run.
func SetRequestRate(w *Worker, bytesPerSecond int) { w.rate = bytesPerSecond }

// OnRenewRound has w call f at the end of each regular renew round (not
// the rounds a late lease asks for). Call it before Run.
func OnRenewRound(w *Worker, f func()) { w.renewRound = f }
