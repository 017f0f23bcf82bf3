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

// refused is the reply of a write the engine failed with err. err is
// returned too when it is a refusal naming the key's partition's leader,
// given before anything of the write was done (engine.FollowableLeader:
// this node's route said it leads, its replication says another node
// does): the session sends the command to that leader (followed).
func refused(err error) (string, error) {
	if engine.FollowableLeader(err) != "" {
		return serverError(err), err
	}
	return serverError(err), nil
}

// Every command may be run from memory alone (resident), where its driver
// must not wait for the disk (an event loop): a command whose engine call
// would read the store first (an ejected value, the metadata of an item out
// of memory whole) then returns engine.ErrWouldBlock, having done and
// counted nothing, and is run again where it may wait (outcome.block). That
// and a refusal to follow (refused) are the only errors the commands
// return; the engine's others become their reply lines.

// writeOpts are the engine's options for a write of the connection's
// durability level, from memory alone when resident.
func (s *Server) writeOpts(resident bool) *engine.WriteOptions {
	return &engine.WriteOptions{Durability: s.opts.Durability, Resident: resident}
}

// ops carries commands out on the server's bucket, counting them in st:
// the server's stats, or, for a connection another node forwards its
// clients' commands over, counters nobody reads (that node counts them,
// as the commands its clients sent; session.ops).
type ops struct {
	*Server
	st *counters
}

// read is the engine read behind every command that looks at an item first
// (get, gets, incr, decr, append, prepend, cas): memcached counts in
// get_expired every such look that finds the item expired. When resident a
// read whose answer needs the store is engine.ErrWouldBlock, counted
// nowhere.
func (s ops) read(ctx context.Context, key string, resident bool) (*engine.Document, error) {
	get := s.target().coll.Get
	if resident {
		get = s.target().coll.GetResident
	}
	d, err := get(ctx, key)
	if errors.Is(err, engine.ErrExpired) {
		// Counted where the item was read, on a forwarded connection too:
		// the forwarding node's answer cannot tell an expired item from a
		// missing one, so only this node can count it.
		s.stats.getExpired.Add(1)
	}
	return d, err
}

// get fetches a live document for get and gets: nil without error on a miss.
// When resident it answers from memory alone: engine.ErrWouldBlock, counted
// nowhere, when the answer needs the store.
func (s ops) get(ctx context.Context, key string, resident bool) (*engine.Document, error) {
	d, err := s.read(ctx, key, resident)
	if errors.Is(err, engine.ErrWouldBlock) {
		return nil, err
	}
	s.st.cmdGet.Add(1)
	switch {
	case err == nil:
		s.st.getHits.Add(1)
		return d, nil
	case errors.Is(err, engine.ErrNotFound):
		s.st.getMisses.Add(1)
		return nil, nil
	default:
		return nil, err
	}
}

// getAndTouch fetches and touches a live document for gat and gats: nil
// without error on a miss.
func (s ops) getAndTouch(ctx context.Context, key string, exptime int64, resident bool) (*engine.Document, error) {
	wo := s.writeOpts(resident)
	wo.Expiry = exptime
	d, err := s.target().coll.TouchWith(ctx, key, wo)
	if errors.Is(err, engine.ErrWouldBlock) {
		return nil, err
	}
	s.st.cmdTouch.Add(1)
	switch {
	case err == nil:
		s.st.touchHits.Add(1)
		return d, nil
	case errors.Is(err, engine.ErrNotFound):
		s.st.touchMisses.Add(1)
		return nil, nil
	default:
		return nil, err
	}
}

// touch runs touch.
func (s ops) touch(ctx context.Context, key string, exptime int64, resident bool) (string, error) {
	wo := s.writeOpts(resident)
	wo.Expiry = exptime
	_, err := s.target().coll.TouchWith(ctx, key, wo)
	if errors.Is(err, engine.ErrWouldBlock) {
		return "", err
	}
	s.st.cmdTouch.Add(1)
	switch {
	case err == nil:
		s.st.touchHits.Add(1)
		return replyTouched, nil
	case errors.Is(err, engine.ErrNotFound):
		s.st.touchMisses.Add(1)
		return replyNotFound, nil
	default:
		return refused(err)
	}
}

// delete runs delete.
func (s ops) delete(ctx context.Context, key string, resident bool) (string, error) {
	_, err := s.target().coll.Delete(ctx, key, s.writeOpts(resident))
	switch {
	case err == nil:
		s.st.deleteHits.Add(1)
		return replyDeleted, nil
	case errors.Is(err, engine.ErrWouldBlock):
		return "", err
	case errors.Is(err, engine.ErrNotFound):
		s.st.deleteMisses.Add(1)
		return replyNotFound, nil
	default:
		return refused(err)
	}
}

// deleteQuietly deletes key if it is there, ignoring the outcome.
func (s *Server) deleteQuietly(ctx context.Context, key string, resident bool) error {
	_, err := s.target().coll.Delete(ctx, key, s.writeOpts(resident))
	switch {
	case err == nil, errors.Is(err, engine.ErrNotFound):
	case errors.Is(err, engine.ErrWouldBlock):
		return err
	default:
		s.log.Warn("memcache: delete after refused set", "key", key, "err", err)
	}
	return nil
}

// store runs set, add, replace, append, prepend and cas with the value val
// (which it does not keep).
func (s ops) store(ctx context.Context, cmd *command, key string, val []byte, resident bool) (string, error) {
	wo := s.writeOpts(resident)
	wo.Expiry, wo.Flags = cmd.exptime, cmd.flags
	var err error
	switch cmd.kind {
	case cmdSet:
		_, err = s.target().coll.Upsert(ctx, key, val, wo)
	case cmdAdd:
		_, err = s.target().coll.Insert(ctx, key, val, wo)
		if errors.Is(err, engine.ErrKeyExists) {
			return replyNotStored, nil
		}
	case cmdReplace:
		_, err = s.target().coll.Replace(ctx, key, val, wo)
		if errors.Is(err, engine.ErrNotFound) {
			return replyNotStored, nil
		}
	case cmdAppend, cmdPrepend:
		return s.concat(ctx, key, val, cmd.kind == cmdPrepend, resident)
	case cmdCas:
		return s.cas(ctx, key, val, wo, cmd.cas)
	}
	switch {
	case errors.Is(err, engine.ErrWouldBlock):
		return "", err
	case err != nil:
		return refused(err)
	}
	s.st.totalItems.Add(1)
	return replyStored, nil
}

// cas stores val over key if the document's CAS is still casID.
func (s ops) cas(ctx context.Context, key string, val []byte, wo *engine.WriteOptions, casID uint64) (string, error) {
	if casID == 0 {
		// The engine reads CAS 0 as "no check"; memcached as a CAS no item
		// has. Answer as memcached: EXISTS if the item is there.
		if _, err := s.read(ctx, key, wo.Resident); err != nil {
			switch {
			case errors.Is(err, engine.ErrWouldBlock):
				return "", err
			case errors.Is(err, engine.ErrNotFound):
				s.st.casMisses.Add(1)
				return replyNotFound, nil
			}
			return refused(err)
		}
		s.st.casBadval.Add(1)
		return replyExists, nil
	}
	wo.CAS = casID
	_, err := s.target().coll.Replace(ctx, key, val, wo)
	switch {
	case errors.Is(err, engine.ErrWouldBlock):
		return "", err
	case err == nil:
		s.st.casHits.Add(1)
		s.st.totalItems.Add(1)
		return replyStored, nil
	case errors.Is(err, engine.ErrNotFound):
		s.st.casMisses.Add(1)
		return replyNotFound, nil
	case errors.Is(err, engine.ErrCASMismatch):
		s.st.casBadval.Add(1)
		return replyExists, nil
	default:
		return refused(err)
	}
}

// concat appends (or prepends) val to key's value, keeping its flags and
// expiry, in a compare-and-swap loop.
func (s ops) concat(ctx context.Context, key string, val []byte, prepend, resident bool) (string, error) {
	for {
		if err := ctx.Err(); err != nil {
			return refused(err)
		}
		d, err := s.read(ctx, key, resident)
		switch {
		case errors.Is(err, engine.ErrWouldBlock):
			return "", err
		case errors.Is(err, engine.ErrNotFound):
			return replyNotStored, nil
		case err != nil:
			return refused(err)
		}
		if itemSize(len(key), d.Flags, len(d.Value)+len(val)) > s.opts.MaxItemSize {
			return replyNotStored, nil // memcached cannot allocate the joined item
		}
		nv := make([]byte, 0, len(d.Value)+len(val))
		if prepend {
			nv = append(append(nv, val...), d.Value...)
		} else {
			nv = append(append(nv, d.Value...), val...)
		}
		_, err = s.target().coll.Replace(ctx, key, nv, s.replaceOpts(d, resident))
		switch {
		case err == nil:
			s.st.totalItems.Add(1)
			return replyStored, nil
		case errors.Is(err, engine.ErrWouldBlock):
			return "", err
		case errors.Is(err, engine.ErrCASMismatch), errors.Is(err, engine.ErrNotFound):
			continue // changed or gone meanwhile: look again
		default:
			return refused(err)
		}
	}
}

// arith runs incr and decr as memcached: the value must read as an unsigned
// 64-bit decimal; incr wraps at 2^64, decr stops at 0; a result shorter than
// the old value is padded with spaces to its length (memcached rewrites the
// item in place), a longer one replaces it. Flags and expiry stay.
func (s ops) arith(ctx context.Context, key string, incr bool, delta uint64, resident bool) (string, error) {
	hits, misses := &s.st.incrHits, &s.st.incrMisses
	if !incr {
		hits, misses = &s.st.decrHits, &s.st.decrMisses
	}
	for {
		if err := ctx.Err(); err != nil {
			return refused(err)
		}
		d, err := s.read(ctx, key, resident)
		switch {
		case errors.Is(err, engine.ErrWouldBlock):
			return "", err
		case errors.Is(err, engine.ErrNotFound):
			misses.Add(1)
			return replyNotFound, nil
		case err != nil:
			return refused(err)
		}
		v, ok := parseIncrValue(d.Value)
		if !ok {
			return replyNonNumeric, nil
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
		_, err = s.target().coll.Replace(ctx, key, nv, s.replaceOpts(d, resident))
		switch {
		case err == nil:
			hits.Add(1)
			return digits, nil
		case errors.Is(err, engine.ErrWouldBlock):
			return "", err
		case errors.Is(err, engine.ErrCASMismatch), errors.Is(err, engine.ErrNotFound):
			continue
		default:
			return refused(err)
		}
	}
}

// replaceOpts are the options of a write that rewrites d's value in place
// (append, prepend, incr, decr): d's CAS, flags and expiry.
func (s *Server) replaceOpts(d *engine.Document, resident bool) *engine.WriteOptions {
	wo := s.writeOpts(resident)
	wo.CAS, wo.Flags, wo.PreserveExpiry = d.CAS, d.Flags, true
	return wo
}
