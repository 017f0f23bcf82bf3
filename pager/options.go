package pager

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Option defaults.
const (
	// DefaultBatchSize is the default Options.BatchSize (documents).
	DefaultBatchSize = 1000
	// DefaultPollInterval is the default Options.PollInterval.
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultMetadataPurgePeriod is the default Options.MetadataPurgePeriod (seconds).
	DefaultMetadataPurgePeriod = 3600
	// DefaultMetadataPurgeBatchSize is the default Options.MetadataPurgeBatchSize (tombstones).
	DefaultMetadataPurgeBatchSize = 100_000
)

// Options configure a Manager. A nil *Options means DefaultOptions().
type Options struct {
	// BatchSize is the most documents one engine call purges: a pager run
	// calls Bucket.ExpireBatch with it until nothing expired is left, and a
	// metadata purge calls Bucket.PurgeTombstones with it likewise. The
	// default value is 1000 (documents).
	BatchSize int
	// PollInterval is how often the background loop started by Start looks
	// at the engine clock for due work. It only polls: whether a run is due
	// is decided by the engine clock, never by the wall clock. The default
	// value is 250ms.
	PollInterval time.Duration
	// MetadataPurgePeriod is the engine-clock time between two metadata purge
	// passes over a bucket (tombstones older than the bucket's purgeInterval
	// are removed). The first pass is at the first tick that sees the bucket.
	// The default value is 3600 (seconds).
	MetadataPurgePeriod int64
	// MetadataPurgeBatchSize is the most tombstones one Bucket.PurgeTombstones
	// call removes. That call visits every document of the bucket, one
	// partition lock at a time, whatever the limit, so the limit bounds the
	// disk queue, not how long anything is blocked; it is larger than
	// BatchSize so that purging many tombstones takes few passes. The
	// default value is 100000 (tombstones).
	MetadataPurgeBatchSize int
	// Logger receives the pager's log lines. The default value discards them.
	Logger *slog.Logger
	// Events are called as runs begin and end. The default value is no
	// events; nil fields are allowed.
	Events *Events
}

// DefaultOptions returns the options New uses when given nil.
func DefaultOptions() *Options {
	o := &Options{}
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills in every unset field with its default. A zero or
// negative number counts as unset.
func (o *Options) EnsureDefaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MetadataPurgePeriod <= 0 {
		o.MetadataPurgePeriod = DefaultMetadataPurgePeriod
	}
	if o.MetadataPurgeBatchSize <= 0 {
		o.MetadataPurgeBatchSize = DefaultMetadataPurgeBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ev := Events{}
	if o.Events != nil {
		ev = *o.Events
	}
	ev.EnsureDefaults()
	o.Events = &ev
}

// Validate reports a field out of range. New does not fail: it treats such
// values as unset. Callers that take options from users (flags, a config
// file) call Validate first to refuse them instead.
func (o *Options) Validate() error {
	switch {
	case o.BatchSize < 0:
		return fmt.Errorf("%w: BatchSize must be positive, got %d", ErrInvalidSetting, o.BatchSize)
	case o.PollInterval < 0:
		return fmt.Errorf("%w: PollInterval must be positive, got %s", ErrInvalidSetting, o.PollInterval)
	case o.MetadataPurgeBatchSize < 0:
		return fmt.Errorf("%w: MetadataPurgeBatchSize must be positive, got %d", ErrInvalidSetting, o.MetadataPurgeBatchSize)
	case o.MetadataPurgePeriod < 0:
		return fmt.Errorf("%w: MetadataPurgePeriod must be positive, got %d", ErrInvalidSetting, o.MetadataPurgePeriod)
	}
	return nil
}
