package index

import "errors"

var (
	// ErrInvalidKey reports a view key (emitted, or given in a Range) that is not
	// valid JSON.
	ErrInvalidKey = errors.New("index: invalid key")

	// ErrReductionTooLarge reports a reduction longer than MaxReductionSize bytes.
	ErrReductionTooLarge = errors.New("index: reduction too large")

	// ErrStop, returned by a Query or Reduce callback, ends the iteration early;
	// the method then returns nil.
	ErrStop = errors.New("index: stop iteration")

	// ErrUnknownView reports a view name that is not in the index's Config.
	ErrUnknownView = errors.New("index: unknown view")

	// ErrNoReducer reports a Reduce on a view configured without a Reducer.
	ErrNoReducer = errors.New("index: view has no reduce function")

	// ErrPartition reports a DocUpdate whose Partition is not below
	// Config.NumPartitions.
	ErrPartition = errors.New("index: partition out of range")

	// ErrInvalidConfig reports a Config that Open cannot use.
	ErrInvalidConfig = errors.New("index: invalid config")

	// ErrCorrupt reports persisted data that this package did not write.
	ErrCorrupt = errors.New("index: corrupt index file")

	// ErrCheckpoint reports a failure to rewrite the checkpoint of the index
	// file (in Apply or Close). The updates were persisted in the log all the
	// same.
	ErrCheckpoint = errors.New("index: checkpoint failed")

	// ErrCheck reports a violated invariant of an index, found by Check: in
	// memory, in the file, or between them. It is not ErrCorrupt, which
	// reports a file that Open cannot read; Check reports such a file as a
	// violation, wrapping ErrCheck only.
	ErrCheck = errors.New("index: check failed")

	// ErrInvalidForecast reports a Forecast asked with an interval or
	// horizon that is not positive, or with too many intervals.
	ErrInvalidForecast = errors.New("index: invalid forecast")

	// ErrClosed reports a call on a closed Index.
	ErrClosed = errors.New("index: index is closed")
)
