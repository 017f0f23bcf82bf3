package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
)

// BucketType is the kind of a bucket.
type BucketType string

const (
	// Couchbase buckets persist to disk and have views.
	Couchbase BucketType = "couchbase"
	// Ephemeral buckets live in memory only and have views.
	Ephemeral BucketType = "ephemeral"
	// Memcached buckets are memory-only caches: no views, no maxTTL.
	Memcached BucketType = "memcached"
)

// Pager defaults, as DESIGN §5 gives them.
const (
	// DefaultExpPagerStime is the default seconds between expiry pager runs.
	DefaultExpPagerStime = 3600
	// DefaultPurgeInterval is the default metadata purge interval, in days.
	DefaultPurgeInterval = 3.0
	// MaxMaxTTL is the largest maxTTL Couchbase accepts (seconds).
	MaxMaxTTL = math.MaxInt32
)

// BucketSettings are a bucket's settings. They persist with the bucket.
type BucketSettings struct {
	// Name is the bucket name: 1..100 of A-Z a-z 0-9 _ - . %, not starting with a dot.
	Name string `json:"name"`
	// Type is couchbase, ephemeral or memcached. The default value is couchbase.
	Type BucketType `json:"bucketType"`
	// MaxTTL caps every later mutation's expiry (seconds, 0 = none). It may change
	// at any time and affects only later mutations.
	MaxTTL int64 `json:"maxTTL"`
	// RAMQuotaMB is the memory quota in MiB. The default value is 100.
	RAMQuotaMB int64 `json:"ramQuotaMB"`
	// PurgeInterval is the metadata (tombstone) purge interval in days; fractions
	// allowed. The default value is 3.
	PurgeInterval float64 `json:"purgeInterval"`
	// ExpPagerStime is the seconds between expiry pager runs, 0 to disable. The
	// default value is 3600 (seconds).
	ExpPagerStime int64 `json:"exp_pager_stime"`
	// ExpPagerInitialRunTime is the hour of day (UTC, 0..23) of the pager's first
	// run, or -1 for none. The default value is -1.
	ExpPagerInitialRunTime int `json:"exp_pager_initial_run_time"`
	// MemHighWat and MemLowWat are the bucket's water marks in bytes
	// (cbepctl's flush_param mem_high_wat and mem_low_wat; 0 is the
	// default: 85% and 75% of the quota). Past the high-water mark a
	// bucket that evicts frees memory down to the low-water mark. Each,
	// when set, is at most the quota, and the low one is below the high
	// one. A change of the quota through SetRAMQuotaMB (the bucket
	// settings form's) moves them in proportion, keeping their share of
	// the quota, as Couchbase does; settings given whole (a cluster node
	// taking its bucket's definition) are taken as they are.
	MemHighWat int64 `json:"mem_high_wat,omitempty"`
	MemLowWat  int64 `json:"mem_low_wat,omitempty"`
	// EvictionPolicy says what the bucket does when its memory passes the
	// quota, as Couchbase names it: for couchbase buckets valueOnly (the
	// default value: values leave memory, keys and metadata stay) or
	// fullEviction (whole items leave memory, so a bucket holds more keys
	// than memory; a read of a key memory lacks reads the disk unless the
	// partition's Bloom filter rules it out; a change of a couchbase
	// bucket's policy restarts the bucket, as Couchbase does: reopen.go),
	// noEviction or nruEviction for ephemeral buckets (the default value is
	// noEviction); memcached buckets always evict least-recently-used items
	// and take no setting.
	EvictionPolicy EvictionPolicy `json:"evictionPolicy,omitempty"`
	// DurabilityMinLevel is the least durability level of every write to
	// the bucket (Couchbase's durabilityMinLevel); a request may ask for
	// more, never less. Couchbase buckets take any level (the default value
	// is persistToMajority: every write is on disk when acknowledged,
	// stricter than Couchbase's none); ephemeral buckets take none or
	// majority (the default value is none: they keep nothing on disk);
	// memcached buckets take none, their only level. A definition stored
	// before the setting reads as the default.
	DurabilityMinLevel Durability `json:"durabilityMinLevel,omitempty"`
	// FlushEnabled lets the REST API's flush (Couchbase's flushEnabled,
	// .../controller/doFlush) and the memcached port's flush_all delete
	// every document of the bucket. The default value is false.
	FlushEnabled bool `json:"flushEnabled,omitempty"`
	// UUID names this incarnation of the bucket (Couchbase's bucket uuid,
	// 32 hexadecimal digits): CreateBucket gives one to a bucket created
	// without it, and it never changes, so a bucket deleted and created
	// again under its name is told apart from the old one (a cluster
	// derives its partitions' Raft groups from it). Empty for a bucket
	// created before buckets had one.
	UUID string `json:"uuid,omitempty"`
	// NumVBuckets is the bucket's number of partitions (vBuckets,
	// Couchbase's numVBuckets), 1..MaxVBuckets, fixed when the bucket is
	// created: keys hash into them, and on a cluster each is one Raft
	// group. Zero when creating takes the engine's Options.NumPartitions
	// (1024 unless set); zero in an update keeps the bucket's.
	NumVBuckets int `json:"numVBuckets,omitempty"`
	// ReplicaNumber is how many replicas of each partition the bucket
	// keeps beside its active copy (Couchbase's replicaNumber),
	// 0..MaxReplicas. On a cluster each partition has ReplicaNumber + 1
	// copies, placed by the orchestrator; on a single node it is kept and
	// shown, with no effect. Unset (the zero ReplicaCount) when creating
	// takes the engine's Options.ReplicaNumber (1 unless set, Couchbase's
	// default; 2 on a cluster node); unset in an update keeps the
	// bucket's. A bucket stored before the setting reads as unset and
	// opens with Options.ReplicaNumber.
	ReplicaNumber ReplicaCount `json:"replicaNumber,omitzero"`
}

// MaxReplicas is the most replicas a bucket may have, as Couchbase's 3.
const MaxReplicas = 3

// ReplicaCount is a bucket's replicaNumber, or no number (its zero value:
// unset, so that settings built without one take a default rather than
// zero replicas). It is comparable, so settings compare with ==, and it
// reads and writes JSON as a plain number.
type ReplicaCount struct {
	n   int
	set bool
}

// Replicas returns the replicaNumber n.
func Replicas(n int) ReplicaCount { return ReplicaCount{n: n, set: true} }

// Get returns the number and whether one is set.
func (c ReplicaCount) Get() (n int, ok bool) { return c.n, c.set }

// Or returns the number, or def when none is set.
func (c ReplicaCount) Or(def int) int {
	if !c.set {
		return def
	}
	return c.n
}

// String returns the number, or "unset".
func (c ReplicaCount) String() string {
	if !c.set {
		return "unset"
	}
	return strconv.Itoa(c.n)
}

// MarshalJSON writes the number, or null when none is set.
func (c ReplicaCount) MarshalJSON() ([]byte, error) {
	if !c.set {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(c.n), 10), nil
}

// UnmarshalJSON reads a number; null leaves the count unset.
func (c *ReplicaCount) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*c = ReplicaCount{}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("engine: replicaNumber: %w", err)
	}
	*c = Replicas(n)
	return nil
}

// MaxVBuckets is the most partitions a bucket may have, as Couchbase's
// 1024.
const MaxVBuckets = 1024

// MaxRAMQuotaMB is the largest ramQuotaMB a bucket takes: 16 TiB, beyond any
// machine's memory, and small enough that a quota in bytes (and Go's memory
// limit, the sum of the quotas) never overflows.
const MaxRAMQuotaMB = 1 << 24

// NewBucketUUID returns a random bucket UUID: 32 hexadecimal digits.
func NewBucketUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails
	return hex.EncodeToString(b[:])
}

// defaultDurability returns the durabilityMinLevel a bucket of type t has
// when none is set.
func defaultDurability(t BucketType) Durability {
	if t == Couchbase {
		return DurabilityPersistToMajority
	}
	return DurabilityNone
}

// EvictionPolicy is a bucket's evictionPolicy setting.
type EvictionPolicy string

const (
	// ValueOnly ejects the values of persisted documents and keeps keys and
	// metadata in memory (couchbase buckets; the default).
	ValueOnly EvictionPolicy = "valueOnly"
	// FullEviction may eject keys and metadata too (couchbase buckets).
	FullEviction EvictionPolicy = "fullEviction"
	// NoEviction refuses writes that would pass the quota, with
	// ErrTempOOM (ephemeral buckets; the default).
	NoEviction EvictionPolicy = "noEviction"
	// NRUEviction deletes the documents not recently used when memory
	// passes the high-water mark (ephemeral buckets).
	NRUEviction EvictionPolicy = "nruEviction"
)

// defaultEvictionPolicy returns the evictionPolicy a bucket of type t has
// when none is set ("" for memcached buckets, which take none).
func defaultEvictionPolicy(t BucketType) EvictionPolicy {
	switch t {
	case Couchbase:
		return ValueOnly
	case Ephemeral:
		return NoEviction
	}
	return ""
}

// withDefaults returns s with unset fields filled in.
func (s BucketSettings) withDefaults() BucketSettings {
	if s.Type == "" {
		s.Type = Couchbase
	}
	if s.RAMQuotaMB == 0 {
		s.RAMQuotaMB = 100
	}
	if s.PurgeInterval == 0 {
		s.PurgeInterval = DefaultPurgeInterval
	}
	if s.ExpPagerStime == 0 && s.ExpPagerInitialRunTime == 0 {
		// Both unset: the pager's defaults. (A caller who wants the pager
		// off, or pinned to midnight, says so with UpdateSettings.)
		s.ExpPagerStime, s.ExpPagerInitialRunTime = DefaultExpPagerStime, -1
	}
	return s
}

// Default water marks, in percent of the quota (Couchbase's).
const (
	// DefaultMemHighWatPercent is the default high-water mark.
	DefaultMemHighWatPercent = 85
	// DefaultMemLowWatPercent is the default low-water mark.
	DefaultMemLowWatPercent = 75
)

// WaterMarks returns the bucket's high- and low-water marks in bytes: the
// ones set, else the defaults (85% and 75% of the quota).
func (s BucketSettings) WaterMarks() (high, low int64) {
	quota := s.RAMQuotaMB << 20
	high, low = s.MemHighWat, s.MemLowWat
	if high == 0 {
		high = quota * DefaultMemHighWatPercent / 100
	}
	if low == 0 {
		low = quota * DefaultMemLowWatPercent / 100
	}
	return high, low
}

// SetRAMQuotaMB sets the quota to mb MiB and moves water marks set for
// the old quota in proportion, keeping their share of it, as Couchbase
// does when a bucket's quota changes.
func (s *BucketSettings) SetRAMQuotaMB(mb int64) {
	old := s.RAMQuotaMB
	s.RAMQuotaMB = mb
	scaleWaterMarks(s, old)
}

// scaleWaterMarks moves water marks set for a quota of oldMB MiB to the
// quota s has, keeping their share of it.
func scaleWaterMarks(s *BucketSettings, oldMB int64) {
	scale := func(v int64) int64 {
		if v <= 0 || oldMB <= 0 || s.RAMQuotaMB <= 0 || v > oldMB<<20 {
			return v
		}
		// v <= oldMB<<20, so v*newMB/oldMB <= newMB<<20 fits in 64 bits.
		hi, lo := bits.Mul64(uint64(v), uint64(s.RAMQuotaMB))
		q, _ := bits.Div64(hi, lo, uint64(oldMB))
		return int64(q)
	}
	s.MemHighWat, s.MemLowWat = scale(s.MemHighWat), scale(s.MemLowWat)
}

// DefaultBucketSettings returns the settings of a new bucket named name.
func DefaultBucketSettings(name string) BucketSettings {
	return BucketSettings{Name: name}.withDefaults()
}

var bucketNameRE = regexp.MustCompile(`^[A-Za-z0-9_%\-][A-Za-z0-9_.%\-]{0,99}$`)

// Validate reports the first setting out of range, naming it.
func (s BucketSettings) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSetting, fmt.Sprintf(format, args...))
	}
	switch {
	case !bucketNameRE.MatchString(s.Name):
		return bad("name: bucket name must be 1-100 characters of A-Z, a-z, 0-9, _, -, . and %%, not starting with a dot")
	case s.Type != Couchbase && s.Type != Ephemeral && s.Type != Memcached:
		return bad("bucketType: must be couchbase, ephemeral or memcached")
	case s.MaxTTL < 0 || s.MaxTTL > MaxMaxTTL:
		return bad("maxTTL: must be an integer between 0 and %d", MaxMaxTTL)
	case s.Type == Memcached && s.MaxTTL != 0:
		return bad("maxTTL: memcached buckets have no maxTTL")
	case s.Type == Couchbase && s.EvictionPolicy != "" && s.EvictionPolicy != ValueOnly && s.EvictionPolicy != FullEviction:
		return bad("evictionPolicy: must be valueOnly or fullEviction for a couchbase bucket")
	case s.Type == Ephemeral && s.EvictionPolicy != "" && s.EvictionPolicy != NoEviction && s.EvictionPolicy != NRUEviction:
		return bad("evictionPolicy: must be noEviction or nruEviction for an ephemeral bucket")
	case s.Type == Memcached && s.EvictionPolicy != "":
		return bad("evictionPolicy: memcached buckets take no evictionPolicy (they always evict least-recently-used items)")
	case s.DurabilityMinLevel != "" && s.DurabilityMinLevel.rank() == 0:
		return bad("durabilityMinLevel: Durability minimum level must be either none, majority, majorityAndPersistActive, or persistToMajority")
	case s.Type == Ephemeral && s.DurabilityMinLevel.rank() > DurabilityMajority.rank():
		return bad("durabilityMinLevel: Durability minimum level must be either none or majority for ephemeral buckets")
	case s.Type == Memcached && s.DurabilityMinLevel.rank() > DurabilityNone.rank():
		return bad("durabilityMinLevel: memcached buckets take no durability level but none")
	case s.RAMQuotaMB < 1 || s.RAMQuotaMB > MaxRAMQuotaMB:
		return bad("ramQuotaMB: must be an integer from 1 to %d (MiB), got %d", MaxRAMQuotaMB, s.RAMQuotaMB)
	case !(s.PurgeInterval >= 0.04 && s.PurgeInterval <= 60):
		return bad("purgeInterval: metadata purge interval must be a number between 0.04 and 60")
	case s.MemHighWat < 0 || s.MemHighWat > s.RAMQuotaMB<<20:
		return bad("mem_high_wat: must be a number of bytes up to the quota (%d), or 0 for the default, got %d", s.RAMQuotaMB<<20, s.MemHighWat)
	case s.MemLowWat < 0 || s.MemLowWat > s.RAMQuotaMB<<20:
		return bad("mem_low_wat: must be a number of bytes up to the quota (%d), or 0 for the default, got %d", s.RAMQuotaMB<<20, s.MemLowWat)
	case s.lowNotBelowHigh():
		high, low := s.WaterMarks()
		return bad("mem_low_wat: must be below mem_high_wat (%d), got %d", high, low)
	case s.ExpPagerStime < 0:
		return bad("exp_pager_stime: must be 0 (disabled) or a positive number of seconds")
	case s.ExpPagerInitialRunTime < -1 || s.ExpPagerInitialRunTime > 23:
		return bad("exp_pager_initial_run_time: must be an hour from -1 to 23")
	case s.NumVBuckets < 0 || s.NumVBuckets > MaxVBuckets:
		return bad("numVBuckets: must be an integer between 1 and %d", MaxVBuckets)
	case s.ReplicaNumber.Or(0) < 0:
		return bad("replicaNumber: The replica number cannot be negative.")
	case s.ReplicaNumber.Or(0) > MaxReplicas:
		return bad("replicaNumber: Replica number larger than %d is not supported.", MaxReplicas)
	}
	return nil
}

// lowNotBelowHigh reports whether the low-water mark is not below the
// high one (with the defaults for those unset).
func (s BucketSettings) lowNotBelowHigh() bool {
	high, low := s.WaterMarks()
	return low >= high
}

var scopeNameRE = regexp.MustCompile(`^[A-Za-z0-9%\-][A-Za-z0-9_%\-]{0,250}$`)

// validateScopeName checks a scope or collection name as Couchbase does: 1..251
// of A-Z a-z 0-9 _ - %, not starting with _ (reserved for _default).
func validateScopeName(what, name string) error {
	if !scopeNameRE.MatchString(name) {
		return fmt.Errorf("%w: %s name must be 1-251 characters of A-Z, a-z, 0-9, _, - and %%, not starting with _", ErrInvalidSetting, what)
	}
	return nil
}
