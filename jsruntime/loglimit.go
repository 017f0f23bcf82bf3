package jsruntime

// Limits on the log(...) helper, per design document (Program): a token
// bucket of LogBurst lines refilled at LogRate lines a second; a line over
// the budget is dropped (and counted, see Program.LogDropped); a line
// longer than MaxLogLine bytes is cut there.
const (
	LogRate    = 10
	LogBurst   = 100
	MaxLogLine = 1024
)

// LogDropped counts the log(...) lines of the program's functions dropped
// because they came faster than LogRate a second (beyond a burst of
// LogBurst).
func (pr *Program) LogDropped() int64 { return pr.logDropped.Load() }
