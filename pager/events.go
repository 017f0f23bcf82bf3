package pager

// Events are optional callbacks a Manager makes, for statistics, logs and
// tests. Any field may be nil. Callbacks run on the goroutine doing the work
// (the background loop, or the caller of Tick, RunNow or PurgeMetadata), and
// that work waits for them. They may call Settings, Stats and SetSettings,
// but not Tick, RunNow or PurgeMetadata for the same bucket, which would wait
// for the very run that called them.
type Events struct {
	// RunBegin is called as a pager run of bucket starts.
	RunBegin func(bucket string)
	// RunEnd is called after every run that RunBegin announced, failed ones
	// included (a failed run also calls Error), with what the run did.
	RunEnd func(bucket string, r RunResult)
	// MetadataPurged is called after each metadata purge pass with the number
	// of tombstones it removed (possibly 0).
	MetadataPurged func(bucket string, purged int)
	// Error is called when a run or a metadata purge started by the
	// background loop or Tick fails.
	Error func(bucket string, err error)
}

// EnsureDefaults replaces every nil callback with one that does nothing.
func (e *Events) EnsureDefaults() {
	if e.RunBegin == nil {
		e.RunBegin = func(string) {}
	}
	if e.RunEnd == nil {
		e.RunEnd = func(string, RunResult) {}
	}
	if e.MetadataPurged == nil {
		e.MetadataPurged = func(string, int) {}
	}
	if e.Error == nil {
		e.Error = func(string, error) {}
	}
}

// TeeEvents returns Events that call a's callback and then b's, for each
// event. Nil callbacks in either are skipped.
func TeeEvents(a, b Events) Events {
	a.EnsureDefaults()
	b.EnsureDefaults()
	return Events{
		RunBegin: func(bucket string) {
			a.RunBegin(bucket)
			b.RunBegin(bucket)
		},
		RunEnd: func(bucket string, r RunResult) {
			a.RunEnd(bucket, r)
			b.RunEnd(bucket, r)
		},
		MetadataPurged: func(bucket string, n int) {
			a.MetadataPurged(bucket, n)
			b.MetadataPurged(bucket, n)
		},
		Error: func(bucket string, err error) {
			a.Error(bucket, err)
			b.Error(bucket, err)
		},
	}
}
