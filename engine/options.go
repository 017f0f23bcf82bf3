package engine

import (
	"fmt"
	"io"
	"log/slog"
)

// Options configure an Engine. A nil *Options means DefaultOptions().
type Options struct {
	// Clock tells the time for every expiry decision. The default value is
	// SystemClock.
	Clock Clock
	// Logger receives the engine's log lines. The default value discards them.
	Logger *slog.Logger
	// NumPartitions is the number of partitions (vBuckets) per bucket. It is fixed
	// when a bucket is created. The default value is 1024, as Couchbase's.
	NumPartitions int
	// MaxBatchSize caps how many mutations one group commit writes. The default
	// value is 50000.
	MaxBatchSize int
	// NoSync skips fsync on commit: faster, and an acknowledged write can be lost
	// on a machine crash (not on a process crash). The default value is false.
	NoSync bool
}

// DefaultOptions returns the options an Engine uses when given nil.
func DefaultOptions() *Options {
	o := &Options{}
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills in every unset field with its default.
func (o *Options) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.NumPartitions == 0 {
		o.NumPartitions = 1024
	}
	if o.MaxBatchSize == 0 {
		o.MaxBatchSize = 50000
	}
}

// Validate reports an option out of range.
func (o *Options) Validate() error {
	if o.NumPartitions < 1 || o.NumPartitions > 65536 {
		return fmt.Errorf("%w: NumPartitions must be 1..65536, got %d", ErrInvalidSetting, o.NumPartitions)
	}
	if o.MaxBatchSize < 1 {
		return fmt.Errorf("%w: MaxBatchSize must be positive", ErrInvalidSetting)
	}
	return nil
}
