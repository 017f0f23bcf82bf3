package engine

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Options configure an Engine. A nil *Options means DefaultOptions().
type Options struct {
	// Clock tells the time for every expiry decision. The default value is
	// SystemClock.
	Clock Clock
	// Logger receives the engine's log lines. The default value discards them.
	Logger *slog.Logger
	// NumPartitions is the number of partitions (vBuckets) of a bucket
	// created without BucketSettings.NumVBuckets, 1..MaxVBuckets. It is
	// fixed when a bucket is created. The default value is 1024, as
	// Couchbase's.
	NumPartitions int
	// ReplicaNumber is the replicaNumber of a bucket created without
	// BucketSettings.ReplicaNumber, and of a bucket stored before buckets
	// had one, 0..MaxReplicas. The default value is 1, as Couchbase's (a
	// cluster node's serve sets the cluster's default, 2).
	ReplicaNumber ReplicaCount
	// MaxBatchSize caps how many mutations one group commit writes. The default
	// value is 50000.
	MaxBatchSize int
	// NoSync skips fsync on commit: faster, and an acknowledged write can be lost
	// on a machine crash; with the pebble store, whose log is written from a
	// buffer in the process shortly after the commit, also the last few
	// milliseconds of them on a process crash (bbolt's writes reach the OS
	// before the commit returns). The default value is false.
	NoSync bool
	// FlushInterval bounds how long a write acknowledged from memory (at
	// durability none or majority) waits before the flusher starts the
	// commit that takes it to disk; the flusher gathers such writes for up
	// to this long into one commit. Writes acknowledged after their commit
	// (the durable levels, Sync) start a commit at once. The default value
	// is DefaultFlushInterval.
	FlushInterval time.Duration
	// MaxAckedBytes bounds, per bucket, the bytes of writes acknowledged
	// from memory (durability none or majority) that are not on disk yet:
	// a write that would take them past it is acknowledged only once its
	// commit is made, as a durable write is, so that a flusher that falls
	// behind (a slow disk) slows such writers down instead of holding
	// their versions in memory without bound (as Couchbase bounds its
	// checkpoints' memory). A write counts as its key, value and
	// recordOverhead. The default value is DefaultMaxAckedBytes.
	MaxAckedBytes int64
	// Storage is the store a new couchbase bucket keeps its data in:
	// StoragePebble or StorageBolt. A bucket already on disk keeps the store
	// it was created with, whatever this says. The default value is
	// StoragePebble.
	Storage string
	// BackgroundWarmup makes Open return once each bucket's store is open
	// and load the buckets' documents in the background, as Couchbase's
	// warm-up does: the buckets serve at once (see Bucket.Warm). The
	// default value, false, loads them before Open returns.
	BackgroundWarmup bool
	// WarmupHook, when set, is called by a bucket's warm-up after each
	// document it reads from the store, with the bucket's name and how
	// many it has read, inside the store's read transaction: a test blocks
	// in it to hold a warm-up at a known point.
	WarmupHook func(bucket string, loaded int64)
	// FetchHook, when set, is called before each read of one document
	// from a bucket's store (a value ejected from memory, an item out of
	// memory whole or not loaded by the warm-up yet), with the bucket's
	// name and the key: a test blocks in it to hold such a read
	// (the memcached port's event loops must not wait for one).
	FetchHook func(bucket, key string)
	// CommitHook, when set, is called by a bucket's flusher before each
	// group commit, with the bucket's name: a test blocks in it to hold
	// commits (what waits for one, and what must not).
	CommitHook func(bucket string)

	// Tests only (internal tests set them): wrapStorage, when set, wraps
	// each couchbase bucket's store as it opens (to inject faults);
	// warmupRetryFirst, when set, replaces the first back-off of a failed
	// background warm-up (warmupRetryFirst).
	wrapStorage      func(storage) storage
	warmupRetryFirst time.Duration
	// beforeMiss, when set, is called by a get, or a listing of the
	// store's keys (listStored), that found its key in no version in
	// memory, with the key, before it reads further (readMiss, the
	// listing's store read): a test blocks in it to hold the reader there.
	beforeMiss func(key string)
}

// DefaultFlushInterval is the default Options.FlushInterval: short enough
// that a crash costs at most a few milliseconds of writes acknowledged from
// memory, long enough that a stream of such writes shares one fsync.
const DefaultFlushInterval = 2 * time.Millisecond

// DefaultMaxAckedBytes is the default Options.MaxAckedBytes: 8 MiB, about
// 23,000 writes of 100 bytes; a flusher that keeps up holds a few hundred.
const DefaultMaxAckedBytes = 8 << 20

// The stores a couchbase bucket can keep its data in (Options.Storage).
const (
	// StoragePebble keeps a bucket in a pebble database (an LSM tree: a
	// write-ahead log and sorted tables) in the bucket's folder "pebble".
	StoragePebble = "pebble"
	// StorageBolt keeps a bucket in one bbolt file (a copy-on-write B+tree),
	// the bucket's "data.db".
	StorageBolt = "bolt"
)

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
	if _, ok := o.ReplicaNumber.Get(); !ok {
		o.ReplicaNumber = Replicas(1)
	}
	if o.MaxBatchSize == 0 {
		o.MaxBatchSize = 50000
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.MaxAckedBytes == 0 {
		o.MaxAckedBytes = DefaultMaxAckedBytes
	}
	if o.Storage == "" {
		o.Storage = StoragePebble
	}
}

// Validate reports an option out of range.
func (o *Options) Validate() error {
	if o.NumPartitions < 1 || o.NumPartitions > MaxVBuckets {
		return fmt.Errorf("%w: NumPartitions must be 1..%d, got %d", ErrInvalidSetting, MaxVBuckets, o.NumPartitions)
	}
	if n := o.ReplicaNumber.Or(1); n < 0 || n > MaxReplicas {
		return fmt.Errorf("%w: ReplicaNumber must be 0..%d, got %d", ErrInvalidSetting, MaxReplicas, n)
	}
	if o.MaxBatchSize < 1 {
		return fmt.Errorf("%w: MaxBatchSize must be positive", ErrInvalidSetting)
	}
	if o.MaxAckedBytes < 0 {
		return fmt.Errorf("%w: MaxAckedBytes must not be negative", ErrInvalidSetting)
	}
	if o.FlushInterval < 0 {
		return fmt.Errorf("%w: FlushInterval must not be negative", ErrInvalidSetting)
	}
	if o.Storage != StoragePebble && o.Storage != StorageBolt {
		return fmt.Errorf("%w: Storage must be %q or %q, got %q", ErrInvalidSetting, StoragePebble, StorageBolt, o.Storage)
	}
	return nil
}
