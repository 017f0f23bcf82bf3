package feed

// WithMemoryPressure returns opts with probe in place of the consumer's
// memory probe: it reports whether the process's memory is near Go's
// memory limit, before each batch a catch-up reads.
func WithMemoryPressure(opts Options, probe func() bool) Options {
	opts.pressure = probe
	return opts
}
