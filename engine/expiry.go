package engine

// MaxRelativeExpiry is the largest expiry value taken as relative to now
// (30 days, as memcached and Couchbase do); larger values are absolute Unix times.
const MaxRelativeExpiry = 60 * 60 * 24 * 30

// NeverExpire is a collection maxTTL that means "never expire, whatever the
// bucket's maxTTL", as Couchbase 7.6 allows.
const NeverExpire = -1

// expiredAtOnce is what a negative expiry is stored as: a moment long past,
// as memcached does, so the document is expired from the start.
const expiredAtOnce = 1

// AbsoluteExpiry turns an expiry value E as a client gives it into an absolute
// Unix time, ignoring any maxTTL: 0 stays 0 (none), 1..2592000 is now+E, a
// larger value is already absolute, and a negative one is a moment long past.
func AbsoluteExpiry(now, e int64) int64 {
	switch {
	case e == 0:
		return 0
	case e < 0:
		return expiredAtOnce
	case e <= MaxRelativeExpiry:
		return now + e
	default:
		return e
	}
}

// EffectiveMaxTTL returns the maxTTL that limits a collection's documents: the
// collection's if it is non-zero (NeverExpire meaning none), else the bucket's.
// The result is 0 when nothing limits them.
func EffectiveMaxTTL(collectionMaxTTL, bucketMaxTTL int64) int64 {
	switch {
	case collectionMaxTTL == NeverExpire:
		return 0
	case collectionMaxTTL > 0:
		return collectionMaxTTL
	default:
		return bucketMaxTTL
	}
}

// LimitExpiry applies an effective maxTTL (seconds, 0 = none) to an absolute
// expiration: no expiry, or one later than now+maxTTL, becomes now+maxTTL.
func LimitExpiry(now, abs, maxTTL int64) int64 {
	if maxTTL <= 0 {
		return abs
	}
	limit := now + maxTTL
	if abs == 0 || abs > limit {
		return limit
	}
	return abs
}

// isExpired reports whether an absolute expiration has passed at now.
func isExpired(expiration, now int64) bool {
	return expiration != 0 && expiration <= now
}
