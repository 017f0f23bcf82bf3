package kv

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/internal/reason"
)

// noCreate is the counter expiry that means "do not create the document".
const noCreate = 0xffffffff

// kvOp is a command that works on the selected bucket, with the
// permissions it needs there.
type kvOp struct {
	need []auth.Action
	run  func(c *conn, ctx context.Context, pkt *memd.Packet)
}

var (
	read      = []auth.Action{auth.DataRead}
	write     = []auth.Action{auth.DataWrite}
	readWrite = []auth.Action{auth.DataRead, auth.DataWrite}
	stats     = []auth.Action{auth.StatsRead}
)

// kvOps are the key-value commands.
var kvOps = map[memd.CmdCode]kvOp{
	memd.CmdGet:                    {read, (*conn).get},
	cmdGetQ:                        {read, (*conn).get},
	cmdGetK:                        {read, (*conn).get},
	cmdGetKQ:                       {read, (*conn).get},
	memd.CmdSet:                    {write, (*conn).store},
	memd.CmdAdd:                    {write, (*conn).store},
	memd.CmdReplace:                {write, (*conn).store},
	memd.CmdDelete:                 {write, (*conn).delete},
	memd.CmdTouch:                  {write, (*conn).touch},
	memd.CmdGAT:                    {readWrite, (*conn).touch},
	memd.CmdAppend:                 {readWrite, (*conn).concat},
	memd.CmdPrepend:                {readWrite, (*conn).concat},
	memd.CmdGetMeta:                {read, (*conn).getMeta},
	memd.CmdIncrement:              {readWrite, (*conn).counter},
	memd.CmdDecrement:              {readWrite, (*conn).counter},
	memd.CmdCollectionsGetID:       {nil, (*conn).collectionID},
	memd.CmdCollectionsGetManifest: {nil, (*conn).manifest},
	memd.CmdSubDocMultiLookup:      {read, (*conn).lookupIn},
	memd.CmdSubDocMultiMutation:    {readWrite, (*conn).mutateIn},
	memd.CmdStat:                   {stats, (*conn).stat},
	memd.CmdGetLocked:              {readWrite, (*conn).getLocked},
	memd.CmdUnlockKey:              {readWrite, (*conn).unlock},
	memd.CmdSubDocGet:              {read, (*conn).lookupPath},
	memd.CmdSubDocExists:           {read, (*conn).lookupPath},
	memd.CmdSubDocGetCount:         {read, (*conn).lookupPath},
	memd.CmdSubDocDictAdd:          {readWrite, (*conn).mutatePath},
	memd.CmdSubDocDictSet:          {readWrite, (*conn).mutatePath},
	memd.CmdSubDocDelete:           {readWrite, (*conn).mutatePath},
	memd.CmdSubDocReplace:          {readWrite, (*conn).mutatePath},
	memd.CmdSubDocArrayPushLast:    {readWrite, (*conn).mutatePath},
	memd.CmdSubDocArrayPushFirst:   {readWrite, (*conn).mutatePath},
	memd.CmdSubDocArrayInsert:      {readWrite, (*conn).mutatePath},
	memd.CmdSubDocArrayAddUnique:   {readWrite, (*conn).mutatePath},
	memd.CmdSubDocCounter:          {readWrite, (*conn).mutatePath},
	memd.CmdGetReplica:             {read, (*conn).getReplica},  // copyCommand
	memd.CmdObserveSeqNo:           {nil, (*conn).observeSeqNo}, // copyCommand; reading or writing the bucket's documents (observeSeqNo)
}

// statusOf is the one place an engine error becomes a status, with the
// reason an XERROR client is shown (without Go package prefixes).
func statusOf(err error) (memd.StatusCode, string) {
	var st memd.StatusCode
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.status, se.reason
	case errors.Is(err, engine.ErrNotFound):
		st = memd.StatusKeyNotFound
	case errors.Is(err, engine.ErrKeyExists), errors.Is(err, engine.ErrCASMismatch):
		st = memd.StatusKeyExists
	case errors.Is(err, engine.ErrLocked):
		st = memd.StatusLocked
	case errors.Is(err, engine.ErrNotLocked):
		st = memd.StatusNotLocked
	case errors.Is(err, engine.ErrValueTooLarge):
		st = memd.StatusTooBig
	case errors.Is(err, engine.ErrTempOOM):
		st = memd.StatusOutOfMemory // as Couchbase answers a write at the quota; the error map says temporary, retry later
	case errors.Is(err, engine.ErrInvalidKey):
		st = memd.StatusInvalidArgs
	case errors.Is(err, engine.ErrCollectionNotFound):
		st = memd.StatusCollectionUnknown
	case errors.Is(err, engine.ErrScopeNotFound):
		st = memd.StatusScopeUnknown
	case errors.Is(err, engine.ErrBucketNotFound):
		st = memd.StatusKeyNotFound // as Couchbase answers SELECT_BUCKET
	case errors.Is(err, engine.ErrNotMyVBucket):
		st = memd.StatusNotMyVBucket // a cluster's write to a partition another node leads (failErr sends the configuration)
	case errors.Is(err, engine.ErrAmbiguous):
		st = memd.StatusSyncWriteAmbiguous // may have been applied: an SDK raises it rather than retry
	case errors.Is(err, engine.ErrStorage), errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrWarmup),
		errors.Is(err, engine.ErrTempFail), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		st = memd.StatusTmpFail
	default:
		st = memd.StatusInternalError
	}
	return st, reason.Of(err)
}

// statusError is a request refused with a status of its own.
type statusError struct {
	status memd.StatusCode
	reason string
}

func (e *statusError) Error() string { return e.reason }

// collection is the collection a request names (its collection ID when
// collections were negotiated, else the default collection).
func (c *conn) collection(pkt *memd.Packet) (*engine.Collection, error) {
	if !c.collections || pkt.CollectionID == 0 {
		return c.bucket.DefaultCollection(), nil
	}
	coll, _, _, err := c.bucket.CollectionByID(engine.CollectionID(pkt.CollectionID))
	return coll, err
}

// datatype is the datatype an answer carrying d's value has.
func (c *conn) datatype(d *engine.Document) uint8 {
	if c.json && d.Type == engine.TypeJSON {
		return uint8(memd.DatatypeFlagJSON)
	}
	return 0
}

// mutationExtras are a mutation's answer extras: its partition UUID and
// sequence number when HELLO asked for them.
func (c *conn) mutationExtras(d *engine.Document) []byte {
	if !c.seqno {
		return nil
	}
	b := binary.BigEndian.AppendUint64(nil, c.bucket.UUID())
	return binary.BigEndian.AppendUint64(b, d.Seq)
}

// flagsExtras are a read's answer extras: the document's flags.
func flagsExtras(d *engine.Document) []byte {
	return binary.BigEndian.AppendUint32(nil, d.Flags)
}

// get runs GET, GETQ, GETK and GETKQ. The quiet ones say nothing on a miss.
func (c *conn) get(ctx context.Context, pkt *memd.Packet) {
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	d, err := coll.Get(ctx, string(pkt.Key))
	quiet := pkt.Command == cmdGetQ || pkt.Command == cmdGetKQ
	if err != nil {
		if quiet && errors.Is(err, engine.ErrNotFound) {
			return
		}
		c.failErr(pkt, err)
		return
	}
	var key []byte
	if pkt.Command == cmdGetK || pkt.Command == cmdGetKQ {
		key = pkt.Key
	}
	c.reply(pkt, memd.StatusSuccess, flagsExtras(d), key, d.Value, shownCAS(coll, d), c.datatype(d))
}

// lockedCAS is the CAS a read shows of a locked document, as Couchbase: no
// one but the lock's holder can then write with a CAS.
const lockedCAS = 0xffffffffffffffff

// shownCAS is the CAS a read shows of d: lockedCAS while a lock holds on it.
func shownCAS(coll *engine.Collection, d *engine.Document) uint64 {
	if coll.Locked(d) {
		return lockedCAS
	}
	return d.CAS
}

// rmwCAS is the CAS a read-modify-write of old (append, counter,
// sub-document mutation) writes with: the request's own if it has one (the
// lock CAS, from a locked document's holder, included), else the CAS of the
// version read, so that a change meanwhile is seen and the loop reads again;
// a lock makes that write ErrLocked, which ends the loop.
func rmwCAS(pkt *memd.Packet, old *engine.Document) uint64 {
	if pkt.Cas != 0 {
		return pkt.Cas
	}
	return old.CAS
}

// getLocked runs GET_LOCKED: the extras are the lock time in seconds (0 or
// none: the default, 15 s; more than 30 s: the default too, as Couchbase).
// The answer is the document with the lock CAS.
func (c *conn) getLocked(ctx context.Context, pkt *memd.Packet) {
	var secs uint32
	switch len(pkt.Extras) {
	case 0:
	case 4:
		secs = binary.BigEndian.Uint32(pkt.Extras)
	default:
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be the lock time (4 bytes)")
		return
	}
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	d, err := coll.GetLocked(ctx, string(pkt.Key), int64(secs))
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, flagsExtras(d), nil, d.Value, d.CAS, c.datatype(d))
}

// unlock runs UNLOCK_KEY with the lock CAS in the header.
func (c *conn) unlock(_ context.Context, pkt *memd.Packet) {
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	if err := coll.Unlock(string(pkt.Key), pkt.Cas); err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, nil, 0, 0)
}

// store runs SET, ADD and REPLACE: extras are flags and expiry; a CAS in
// the header must match.
func (c *conn) store(ctx context.Context, pkt *memd.Packet) {
	if len(pkt.Extras) != 8 {
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be flags and expiry (8 bytes)")
		return
	}
	if pkt.Command == memd.CmdAdd && pkt.Cas != 0 {
		c.fail(pkt, memd.StatusInvalidArgs, "ADD takes no CAS")
		return
	}
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	wo := &engine.WriteOptions{
		Flags: binary.BigEndian.Uint32(pkt.Extras), Expiry: int64(binary.BigEndian.Uint32(pkt.Extras[4:])),
		CAS: pkt.Cas, PreserveExpiry: pkt.PreserveExpiryFrame != nil, Durability: level(pkt),
	}
	var d *engine.Document
	switch pkt.Command {
	case memd.CmdSet:
		d, err = coll.Upsert(ctx, string(pkt.Key), pkt.Value, wo)
	case memd.CmdAdd:
		d, err = coll.Insert(ctx, string(pkt.Key), pkt.Value, wo)
	default:
		d, err = coll.Replace(ctx, string(pkt.Key), pkt.Value, wo)
	}
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, nil, d.CAS, 0)
}

// delete runs DELETE; a CAS in the header must match.
func (c *conn) delete(ctx context.Context, pkt *memd.Packet) {
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	d, err := coll.Delete(ctx, string(pkt.Key), &engine.WriteOptions{CAS: pkt.Cas, Durability: level(pkt)})
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, nil, d.CAS, 0)
}

// touch runs TOUCH and GAT (which answers the document too): the extras
// are the new expiry.
func (c *conn) touch(ctx context.Context, pkt *memd.Packet) {
	if len(pkt.Extras) != 4 {
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be the expiry (4 bytes)")
		return
	}
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	d, err := coll.TouchWith(ctx, string(pkt.Key), &engine.WriteOptions{Expiry: int64(binary.BigEndian.Uint32(pkt.Extras)), Durability: level(pkt)})
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	if pkt.Command == memd.CmdGAT {
		c.reply(pkt, memd.StatusSuccess, flagsExtras(d), nil, d.Value, d.CAS, c.datatype(d))
		return
	}
	c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, nil, d.CAS, 0)
}

// concat runs APPEND and PREPEND: the value joins the document's, whose
// flags and expiry stay; a CAS in the header must match.
func (c *conn) concat(ctx context.Context, pkt *memd.Packet) {
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	key := string(pkt.Key)
	for {
		if err := ctx.Err(); err != nil {
			c.failErr(pkt, err)
			return
		}
		old, err := coll.Get(ctx, key)
		if err != nil {
			c.failErr(pkt, err)
			return
		}
		if pkt.Cas != 0 && pkt.Cas != old.CAS && !coll.Locked(old) {
			c.fail(pkt, memd.StatusKeyExists, "cas mismatch")
			return
		}
		v := make([]byte, 0, len(old.Value)+len(pkt.Value))
		if pkt.Command == memd.CmdPrepend {
			v = append(append(v, pkt.Value...), old.Value...)
		} else {
			v = append(append(v, old.Value...), pkt.Value...)
		}
		d, err := coll.Replace(ctx, key, v, &engine.WriteOptions{CAS: rmwCAS(pkt, old), Flags: old.Flags, PreserveExpiry: true, Durability: level(pkt)})
		switch {
		case err == nil:
			c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, nil, d.CAS, 0)
			return
		case (errors.Is(err, engine.ErrCASMismatch) || errors.Is(err, engine.ErrNotFound)) && pkt.Cas == 0:
			continue // changed meanwhile: look again
		default:
			c.failErr(pkt, err)
			return
		}
	}
}

// getMeta runs GET_META: whether the document is deleted, its flags,
// expiration and revision, and (extras version 2) its datatype. It reads
// without side effects (no lazy expiry, no sliding extension).
func (c *conn) getMeta(_ context.Context, pkt *memd.Packet) {
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	// The metadata alone, never an ejected value read back. A deleted
	// document not purged yet answers with its tombstone's metadata, as
	// Couchbase's does (an SDK's Exists reads the deleted flag;
	// XDCR-style tools read the revision and CAS).
	d, err := coll.Meta(string(pkt.Key))
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	var deleted uint32
	exp := uint32(d.Expiration)
	if d.Deleted {
		// A tombstone's expiry field holds when it was deleted, as
		// Couchbase's does (the metadata purge's clock).
		deleted, exp = 1, uint32(d.DeletedAt)
	}
	ext := binary.BigEndian.AppendUint32(nil, deleted)
	ext = binary.BigEndian.AppendUint32(ext, d.Flags)
	ext = binary.BigEndian.AppendUint32(ext, exp)
	ext = binary.BigEndian.AppendUint64(ext, d.RevSeq)
	if len(pkt.Extras) == 1 && pkt.Extras[0] == 2 {
		ext = append(ext, c.datatype(d))
	}
	c.reply(pkt, memd.StatusSuccess, ext, nil, nil, shownCAS(coll, d), 0)
}

// counter runs INCREMENT and DECREMENT: extras are the delta, the initial
// value and the expiry of a document it creates (0xffffffff: create none).
// The value must read as an unsigned decimal; an increment wraps at 2^64,
// a decrement stops at 0; flags and expiry stay. The answer is the new
// value as 8 bytes.
func (c *conn) counter(ctx context.Context, pkt *memd.Packet) {
	if len(pkt.Extras) != 20 {
		c.fail(pkt, memd.StatusInvalidArgs, "extras must be delta, initial value and expiry (20 bytes)")
		return
	}
	coll, err := c.collection(pkt)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	delta := binary.BigEndian.Uint64(pkt.Extras)
	initial := binary.BigEndian.Uint64(pkt.Extras[8:])
	exp := binary.BigEndian.Uint32(pkt.Extras[16:])
	key := string(pkt.Key)
	for {
		if err := ctx.Err(); err != nil {
			c.failErr(pkt, err)
			return
		}
		var d *engine.Document
		var v uint64
		old, err := coll.Get(ctx, key)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			if exp == noCreate {
				c.failErr(pkt, err)
				return
			}
			v = initial
			d, err = coll.Insert(ctx, key, []byte(strconv.FormatUint(v, 10)), &engine.WriteOptions{Expiry: int64(exp), Durability: level(pkt)})
		case err != nil:
			c.failErr(pkt, err)
			return
		default:
			n, perr := strconv.ParseUint(strings.TrimSpace(string(old.Value)), 10, 64)
			if perr != nil {
				c.fail(pkt, memd.StatusBadDelta, "the document's value is not an unsigned number")
				return
			}
			switch {
			case pkt.Command == memd.CmdIncrement:
				v = n + delta
			case delta > n:
				v = 0
			default:
				v = n - delta
			}
			d, err = coll.Replace(ctx, key, []byte(strconv.FormatUint(v, 10)), &engine.WriteOptions{CAS: rmwCAS(pkt, old), Flags: old.Flags, PreserveExpiry: true, Durability: level(pkt)})
		}
		switch {
		case err == nil:
			c.reply(pkt, memd.StatusSuccess, c.mutationExtras(d), nil, binary.BigEndian.AppendUint64(nil, v), d.CAS, 0)
			return
		case pkt.Cas == 0 && (errors.Is(err, engine.ErrCASMismatch) || errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrKeyExists)):
			continue // changed meanwhile: look again
		default:
			c.failErr(pkt, err)
			return
		}
	}
}

// collectionID runs GET_COLLECTION_ID: the value is "scope.collection"
// (an empty part is _default); the answer's extras are the manifest UID
// and the collection ID.
func (c *conn) collectionID(_ context.Context, pkt *memd.Packet) {
	path := string(pkt.Value)
	if path == "" {
		path = string(pkt.Key)
	}
	scope, name, ok := strings.Cut(path, ".")
	if !ok {
		c.fail(pkt, memd.StatusInvalidArgs, "the collection path must be scope.collection")
		return
	}
	if scope == "" {
		scope = "_default"
	}
	if name == "" {
		name = "_default"
	}
	coll, err := c.bucket.Collection(scope, name)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	ext := binary.BigEndian.AppendUint64(nil, c.bucket.ManifestUID())
	ext = binary.BigEndian.AppendUint32(ext, uint32(coll.ID()))
	c.reply(pkt, memd.StatusSuccess, ext, nil, nil, 0, 0)
}

// manifestJSON is the collections manifest in Couchbase's shape (UIDs in
// hexadecimal).
type manifestJSON struct {
	UID    string          `json:"uid"`
	Scopes []manifestScope `json:"scopes"`
}

type manifestScope struct {
	UID         string               `json:"uid"`
	Name        string               `json:"name"`
	Collections []manifestCollection `json:"collections"`
}

type manifestCollection struct {
	UID    string `json:"uid"`
	Name   string `json:"name"`
	MaxTTL int64  `json:"maxTTL,omitempty"`
}

// manifest runs COLLECTIONS_GET_MANIFEST, scopes numbered by
// clusterconfig.ScopeUIDs.
func (c *conn) manifest(_ context.Context, pkt *memd.Packet) {
	m := manifestJSON{UID: strconv.FormatUint(c.bucket.ManifestUID(), 16), Scopes: []manifestScope{}}
	scopes := c.bucket.Scopes()
	uids := clusterconfig.ScopeUIDs(scopes)
	for i, s := range scopes {
		ms := manifestScope{UID: strconv.FormatUint(uint64(uids[i]), 16), Name: s.Name, Collections: []manifestCollection{}}
		for _, coll := range s.Collections {
			ms.Collections = append(ms.Collections, manifestCollection{UID: strconv.FormatUint(uint64(coll.ID), 16), Name: coll.Name, MaxTTL: coll.MaxTTL})
		}
		m.Scopes = append(m.Scopes, ms)
	}
	b, err := json.Marshal(m)
	if err != nil {
		c.failErr(pkt, err)
		return
	}
	c.reply(pkt, memd.StatusSuccess, nil, nil, b, 0, uint8(memd.DatatypeFlagJSON))
}
