package memcache

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/reason"
)

// The commands, on the engine. Each returns the reply line (or the document,
// for retrievals) and keeps the counters; engine failures become
// SERVER_ERROR replies through serverError.

// serverError is the one place an engine error becomes a reply line. The
// line reads without the Go package prefixes of the error text ("engine:
// ..."): see internal/reason.
func serverError(err error) string {
	switch {
	case errors.Is(err, engine.ErrValueTooLarge):
		return replyTooLarge
	case errors.Is(err, engine.ErrInvalidKey):
		return replyBadFormat
	case errors.Is(err, engine.ErrTempOOM):
		return replyNoMemory
	case errors.Is(err, engine.ErrWarmup):
		return replyServerErrorSP + "temporary failure"
	case errors.Is(err, engine.ErrClosed):
		return replyServerErrorSP + "the bucket is closed"
	case errors.Is(err, engine.ErrLocked):
		return replyLocked
	}
	msg := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, reason.Of(err))
	return replyServerErrorSP + msg
}

// read is the engine read behind every command that looks at an item first
// (get, gets, incr, decr, append, prepend, cas): memcached counts in
// get_expired every such look that finds the item expired.
func (s *Server) read(ctx context.Context, key string) (*engine.Document, error) {
	return s.readFrom(ctx, key, false)
}

// readFrom is read, from memory alone when resident: then a read whose
// answer needs the store is engine.ErrWouldBlock, counted nowhere.
func (s *Server) readFrom(ctx context.Context, key string, resident bool) (*engine.Document, error) {
	get := s.coll.Get
	if resident {
		get = s.coll.GetResident
	}
	d, err := get(ctx, key)
	if errors.Is(err, engine.ErrExpired) {
		s.stats.getExpired.Add(1)
	}
	return d, err
}

// get fetches a live document for get and gets: nil without error on a miss.
// When resident it answers from memory alone: engine.ErrWouldBlock, counted
// nowhere, when the answer needs the store.
func (s *Server) get(ctx context.Context, key string, resident bool) (*engine.Document, error) {
	d, err := s.readFrom(ctx, key, resident)
	if resident && errors.Is(err, engine.ErrWouldBlock) {
		return nil, err
	}
	s.stats.cmdGet.Add(1)
	switch {
	case err == nil:
		s.stats.getHits.Add(1)
		return d, nil
	case errors.Is(err, engine.ErrNotFound):
		s.stats.getMisses.Add(1)
		return nil, nil
	default:
		return nil, err
	}
}

// getAndTouch fetches and touches a live document for gat and gats: nil
// without error on a miss.
func (s *Server) getAndTouch(ctx context.Context, key string, exptime int64) (*engine.Document, error) {
	s.stats.cmdTouch.Add(1)
	d, err := s.coll.TouchWith(ctx, key, &engine.WriteOptions{Expiry: exptime, Durability: s.opts.Durability})
	switch {
	case err == nil:
		s.stats.touchHits.Add(1)
		return d, nil
	case errors.Is(err, engine.ErrNotFound):
		s.stats.touchMisses.Add(1)
		return nil, nil
	default:
		return nil, err
	}
}

func (s *Server) touch(ctx context.Context, key string, exptime int64) string {
	s.stats.cmdTouch.Add(1)
	_, err := s.coll.TouchWith(ctx, key, &engine.WriteOptions{Expiry: exptime, Durability: s.opts.Durability})
	switch {
	case err == nil:
		s.stats.touchHits.Add(1)
		return replyTouched
	case errors.Is(err, engine.ErrNotFound):
		s.stats.touchMisses.Add(1)
		return replyNotFound
	default:
		return serverError(err)
	}
}

func (s *Server) delete(ctx context.Context, key string) string {
	_, err := s.coll.Delete(ctx, key, &engine.WriteOptions{Durability: s.opts.Durability})
	switch {
	case err == nil:
		s.stats.deleteHits.Add(1)
		return replyDeleted
	case errors.Is(err, engine.ErrNotFound):
		s.stats.deleteMisses.Add(1)
		return replyNotFound
	default:
		return serverError(err)
	}
}

// deleteQuietly deletes key if it is there, ignoring the outcome.
func (s *Server) deleteQuietly(ctx context.Context, key string) {
	if _, err := s.coll.Delete(ctx, key, &engine.WriteOptions{Durability: s.opts.Durability}); err != nil && !errors.Is(err, engine.ErrNotFound) {
		s.log.Warn("memcache: delete after refused set", "key", key, "err", err)
	}
}

// store runs set, add, replace, append, prepend and cas with the value val
// (which it does not keep).
func (s *Server) store(ctx context.Context, cmd *command, key string, val []byte) string {
	wo := &engine.WriteOptions{Expiry: cmd.exptime, Flags: cmd.flags, Durability: s.opts.Durability}
	var err error
	switch cmd.kind {
	case cmdSet:
		_, err = s.coll.Upsert(ctx, key, val, wo)
	case cmdAdd:
		_, err = s.coll.Insert(ctx, key, val, wo)
		if errors.Is(err, engine.ErrKeyExists) {
			return replyNotStored
		}
	case cmdReplace:
		_, err = s.coll.Replace(ctx, key, val, wo)
		if errors.Is(err, engine.ErrNotFound) {
			return replyNotStored
		}
	case cmdAppend, cmdPrepend:
		return s.concat(ctx, key, val, cmd.kind == cmdPrepend)
	case cmdCas:
		return s.cas(ctx, key, val, wo, cmd.cas)
	}
	if err != nil {
		return serverError(err)
	}
	s.stats.totalItems.Add(1)
	return replyStored
}

// cas stores val over key if the document's CAS is still casID.
func (s *Server) cas(ctx context.Context, key string, val []byte, wo *engine.WriteOptions, casID uint64) string {
	if casID == 0 {
		// The engine reads CAS 0 as "no check"; memcached as a CAS no item
		// has. Answer as memcached: EXISTS if the item is there.
		if _, err := s.read(ctx, key); err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				s.stats.casMisses.Add(1)
				return replyNotFound
			}
			return serverError(err)
		}
		s.stats.casBadval.Add(1)
		return replyExists
	}
	wo.CAS = casID
	_, err := s.coll.Replace(ctx, key, val, wo)
	switch {
	case err == nil:
		s.stats.casHits.Add(1)
		s.stats.totalItems.Add(1)
		return replyStored
	case errors.Is(err, engine.ErrNotFound):
		s.stats.casMisses.Add(1)
		return replyNotFound
	case errors.Is(err, engine.ErrCASMismatch):
		s.stats.casBadval.Add(1)
		return replyExists
	default:
		return serverError(err)
	}
}

// concat appends (or prepends) val to key's value, keeping its flags and
// expiry, in a compare-and-swap loop.
func (s *Server) concat(ctx context.Context, key string, val []byte, prepend bool) string {
	for {
		if err := ctx.Err(); err != nil {
			return serverError(err)
		}
		d, err := s.read(ctx, key)
		if errors.Is(err, engine.ErrNotFound) {
			return replyNotStored
		}
		if err != nil {
			return serverError(err)
		}
		if itemSize(len(key), d.Flags, len(d.Value)+len(val)) > s.opts.MaxItemSize {
			return replyNotStored // memcached cannot allocate the joined item
		}
		nv := make([]byte, 0, len(d.Value)+len(val))
		if prepend {
			nv = append(append(nv, val...), d.Value...)
		} else {
			nv = append(append(nv, d.Value...), val...)
		}
		_, err = s.coll.Replace(ctx, key, nv, &engine.WriteOptions{CAS: d.CAS, Flags: d.Flags, PreserveExpiry: true, Durability: s.opts.Durability})
		switch {
		case err == nil:
			s.stats.totalItems.Add(1)
			return replyStored
		case errors.Is(err, engine.ErrCASMismatch), errors.Is(err, engine.ErrNotFound):
			continue // changed or gone meanwhile: look again
		default:
			return serverError(err)
		}
	}
}

// arith runs incr and decr as memcached: the value must read as an unsigned
// 64-bit decimal; incr wraps at 2^64, decr stops at 0; a result shorter than
// the old value is padded with spaces to its length (memcached rewrites the
// item in place), a longer one replaces it. Flags and expiry stay.
func (s *Server) arith(ctx context.Context, key string, incr bool, delta uint64) string {
	hits, misses := &s.stats.incrHits, &s.stats.incrMisses
	if !incr {
		hits, misses = &s.stats.decrHits, &s.stats.decrMisses
	}
	for {
		if err := ctx.Err(); err != nil {
			return serverError(err)
		}
		d, err := s.read(ctx, key)
		if errors.Is(err, engine.ErrNotFound) {
			misses.Add(1)
			return replyNotFound
		}
		if err != nil {
			return serverError(err)
		}
		v, ok := parseIncrValue(d.Value)
		if !ok {
			return replyNonNumeric
		}
		switch {
		case incr:
			v += delta
		case delta > v:
			v = 0
		default:
			v -= delta
		}
		digits := strconv.FormatUint(v, 10)
		nv := []byte(digits)
		if len(nv) < len(d.Value) {
			nv = append(nv, strings.Repeat(" ", len(d.Value)-len(nv))...)
		}
		_, err = s.coll.Replace(ctx, key, nv, &engine.WriteOptions{CAS: d.CAS, Flags: d.Flags, PreserveExpiry: true, Durability: s.opts.Durability})
		switch {
		case err == nil:
			hits.Add(1)
			return digits
		case errors.Is(err, engine.ErrCASMismatch), errors.Is(err, engine.ErrNotFound):
			continue
		default:
			return serverError(err)
		}
	}
}
