package feed

// WithMemoryPressure returns opts with probe in place of the consumer's
// memory probe: it reports whether the process's memory is near Go's
// memory limit, before each batch a catch-up reads.
func WithMemoryPressure(opts Options, probe func() bool) Options {
	opts.pressure = probe
	return opts
}

// WithWaitHook returns opts with hook called by a catch-up to a target
// each time it is about to wait for the right to change the sink while
// another holds it, with whether the sink then held its target: a test
// knows the catch-up waits.
func WithWaitHook(opts Options, hook func(held bool)) Options {
	opts.waiting = hook
	return opts
}
