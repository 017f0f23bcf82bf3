package jsruntime

import "time"

// SetLogClock sets the clock of the log(...) rate limit of the programs p
// loads from now on.
func SetLogClock(p *Pool, now func() time.Time) { p.now = now }
