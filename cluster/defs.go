package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mayflydb/mayfly/engine"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key prefixes of the definitions every node applies to its own services.
const (
	ddocsPrefix       = "/mayfly/ddocs/"
	searchPrefix      = "/mayfly/search/"
	collectionsPrefix = "/mayfly/collections/"
	usersPrefix       = "/mayfly/users/"
	flushPrefix       = "/mayfly/flush/"
)

// ManifestName is the name of a bucket's one Manifests definition:
// /mayfly/collections/BUCKET/manifest.
const ManifestName = "manifest"

// DefKind names a kind of definition kept in etcd, one key per definition
// under a prefix of its own: PREFIX/BUCKET/NAME (a bucket name holds no
// '/'; a definition's name may).
type DefKind int

const (
	// DesignDocs are design documents: /mayfly/ddocs/BUCKET/NAME holds a
	// DesignDocDef (NAME without "_design/").
	DesignDocs DefKind = iota
	// SearchDefs are full-text index definitions: /mayfly/search/BUCKET/NAME
	// holds the definition as the search service stores it (its uuid
	// included).
	SearchDefs
	// Manifests are buckets' scopes and collections:
	// /mayfly/collections/BUCKET/manifest holds an engine.Manifest (see
	// UpdateManifest).
	Manifests
	// Users are the cluster's users: /mayfly/users/local/ID holds a
	// UserEntry (the "bucket" is the user's domain, always UserDomain; see
	// users.go).
	Users
	// Flushes are buckets' flushes: /mayfly/flush/BUCKET/state holds a
	// FlushState (see flush.go).
	Flushes
)

// prefix returns the kind's key prefix.
func (k DefKind) prefix() string {
	switch k {
	case SearchDefs:
		return searchPrefix
	case Manifests:
		return collectionsPrefix
	case Users:
		return usersPrefix
	case Flushes:
		return flushPrefix
	}
	return ddocsPrefix
}

// String names the kind, for errors and logs.
func (k DefKind) String() string {
	switch k {
	case SearchDefs:
		return "search definition"
	case Manifests:
		return "collections manifest"
	case Users:
		return "user"
	case Flushes:
		return "flush"
	}
	return "design document"
}

// defKey is the key of definition name of bucket.
func defKey(k DefKind, bucket, name string) string { return k.prefix() + bucket + "/" + name }

// DesignDocDef is a design document's entry under /mayfly/ddocs/: the
// version every node makes its revision's N ("N-hash", the hash of the
// body) and the body. A deleted design document keeps its entry, marked
// Deleted without a body, so that one created again under its name goes on
// counting, as a single node's does.
type DesignDocDef struct {
	// Version counts the design document's stores and deletes, from 1.
	Version uint64 `json:"version"`
	// Body is the design document as the client stored it.
	Body json.RawMessage `json:"body,omitempty"`
	// Deleted marks a deleted design document.
	Deleted bool `json:"deleted,omitempty"`
}

// ParseDesignDocDef decodes a design document's entry (a Def's Value).
func ParseDesignDocDef(value []byte) (DesignDocDef, error) {
	var d DesignDocDef
	if err := json.Unmarshal(value, &d); err != nil {
		return DesignDocDef{}, fmt.Errorf("cluster: a design document's entry: %w", err)
	}
	return d, nil
}

// PutDesignDoc writes body as the next version of design document name of
// bucket (1 for one never stored) and returns that version and the etcd
// revision of the write. Concurrent writers are ordered by etcd: each
// version is written once, conditioned on the entry it follows, and a
// writer that lost the race counts again from the winner's. A write etcd
// did not take within WriteTimeout is ErrUnavailable (Unavailable).
func PutDesignDoc(ctx context.Context, cli *clientv3.Client, bucket, name string, body []byte) (version uint64, rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		rev, err = updateDesignDoc(ctx, cli, bucket, name, func(cur DesignDocDef, exists bool) (DesignDocDef, error) {
			version = cur.Version + 1
			return DesignDocDef{Version: version, Body: body}, nil
		})
		return err
	})
	return version, rev, err
}

// DeleteDesignDoc marks design document name of bucket deleted and returns
// the etcd revision of the write; ErrDefNotFound when it is not there (never
// stored, or deleted), ErrUnavailable as PutDesignDoc's.
func DeleteDesignDoc(ctx context.Context, cli *clientv3.Client, bucket, name string) (rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		rev, err = updateDesignDoc(ctx, cli, bucket, name, func(cur DesignDocDef, exists bool) (DesignDocDef, error) {
			if !exists || cur.Deleted {
				return DesignDocDef{}, fmt.Errorf("%w: design document %q of bucket %q", ErrDefNotFound, name, bucket)
			}
			return DesignDocDef{Version: cur.Version + 1, Deleted: true}, nil
		})
		return err
	})
	return rev, err
}

// updateDesignDoc writes next(current entry) in a transaction conditioned
// on the entry read, reading again when another write came between.
func updateDesignDoc(ctx context.Context, cli *clientv3.Client, bucket, name string,
	next func(cur DesignDocDef, exists bool) (DesignDocDef, error)) (int64, error) {
	key := defKey(DesignDocs, bucket, name)
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("cluster: reading design document %q of bucket %q: %w", name, bucket, err)
		}
		var cur DesignDocDef
		var modRev int64
		if len(resp.Kvs) > 0 {
			if cur, err = ParseDesignDocDef(resp.Kvs[0].Value); err != nil {
				return 0, err
			}
			modRev = resp.Kvs[0].ModRevision
		}
		d, err := next(cur, len(resp.Kvs) > 0)
		if err != nil {
			return 0, err
		}
		data, err := json.Marshal(d)
		if err != nil {
			return 0, err
		}
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return 0, fmt.Errorf("cluster: writing design document %q of bucket %q: %w", name, bucket, err)
		}
		if tr.Succeeded {
			return tr.Header.Revision, nil
		}
	}
}

// PutSearchDef writes a full-text index definition (as the search service
// stores it) and returns the etcd revision of the write; ErrUnavailable as
// PutDesignDoc's.
func PutSearchDef(ctx context.Context, cli *clientv3.Client, bucket, name string, body []byte) (rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		resp, err := cli.Put(ctx, defKey(SearchDefs, bucket, name), string(body))
		if err != nil {
			return fmt.Errorf("cluster: writing search definition %q of bucket %q: %w", name, bucket, err)
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev, err
}

// DeleteSearchDef deletes a full-text index definition and returns the
// etcd revision of the delete; ErrDefNotFound when there is none,
// ErrUnavailable as PutDesignDoc's.
func DeleteSearchDef(ctx context.Context, cli *clientv3.Client, bucket, name string) (rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		resp, err := cli.Delete(ctx, defKey(SearchDefs, bucket, name))
		if err != nil {
			return fmt.Errorf("cluster: deleting search definition %q of bucket %q: %w", name, bucket, err)
		}
		if resp.Deleted == 0 {
			return fmt.Errorf("%w: search definition %q of bucket %q", ErrDefNotFound, name, bucket)
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev, err
}

// UpdateManifest changes bucket's scopes and collections in the cluster's
// state: edit gets the manifest etcd holds (seed's when it holds none:
// the bucket as it was made, before any change) and changes it, and the
// result is written in a transaction conditioned on the manifest read (a
// writer that lost the race edits the winner's). An edit's error is
// returned as it is, nothing written. It returns the manifest written and
// the etcd revision of the write; every node applies it
// (engine.Bucket.ApplyManifest), so collection IDs agree. ErrUnavailable as
// PutDesignDoc's.
func UpdateManifest(ctx context.Context, cli *clientv3.Client, bucket string, seed func() engine.Manifest,
	edit func(m *engine.Manifest) error) (m engine.Manifest, rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		m, rev, err = updateManifest(ctx, cli, bucket, seed, edit)
		return err
	})
	return m, rev, err
}

// updateManifest is UpdateManifest, unbounded.
func updateManifest(ctx context.Context, cli *clientv3.Client, bucket string, seed func() engine.Manifest,
	edit func(m *engine.Manifest) error) (engine.Manifest, int64, error) {
	key := defKey(Manifests, bucket, ManifestName)
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return engine.Manifest{}, 0, fmt.Errorf("cluster: reading the collections of bucket %q: %w", bucket, err)
		}
		var m engine.Manifest
		var modRev int64
		if len(resp.Kvs) > 0 {
			if m, err = ParseManifest(resp.Kvs[0].Value); err != nil {
				return engine.Manifest{}, 0, fmt.Errorf("bucket %q: %w", bucket, err)
			}
			modRev = resp.Kvs[0].ModRevision
		} else {
			m = seed()
		}
		if err := edit(&m); err != nil {
			return engine.Manifest{}, 0, err
		}
		data, err := json.Marshal(m)
		if err != nil {
			return engine.Manifest{}, 0, err
		}
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return engine.Manifest{}, 0, fmt.Errorf("cluster: writing the collections of bucket %q: %w", bucket, err)
		}
		if tr.Succeeded {
			return m, tr.Header.Revision, nil
		}
	}
}

// ParseManifest decodes a bucket's collections manifest (a Manifests
// Def's Value).
func ParseManifest(value []byte) (engine.Manifest, error) {
	var m engine.Manifest
	if err := json.Unmarshal(value, &m); err != nil {
		return engine.Manifest{}, fmt.Errorf("cluster: a collections manifest: %w", err)
	}
	return m, nil
}

// bucketDefDeletes returns the deletions of every definition etcd keeps
// for bucket, each kind under its own prefix (PREFIX/BUCKET/): its design
// documents, search definitions, collections manifest and flush record.
// A bucket deleted from the cluster takes them in the transaction that
// deletes it (DeleteBucket): one created again under its name starts with
// none, as a single node's does. The cluster's users are no bucket's.
func bucketDefDeletes(bucket string) []clientv3.Op {
	var ops []clientv3.Op
	for _, k := range []DefKind{DesignDocs, SearchDefs, Manifests, Flushes} {
		ops = append(ops, clientv3.OpDelete(defKey(k, bucket, ""), clientv3.WithPrefix()))
	}
	return ops
}

// Def is one definition as a DefMirror holds it.
type Def struct {
	// Bucket and Name say whose definition it is.
	Bucket, Name string
	// Value is the key's value (a DesignDocDef's JSON, or a search
	// definition).
	Value []byte
	// ModRevision is the etcd revision that last wrote it: a later write
	// has a higher one.
	ModRevision int64
}

// DefMirror is a node's copy of one kind of definition, kept up to date
// from etcd by Run: the whole prefix read once, then watched (read again
// whole when the watch's history was compacted). What it holds is what
// etcd held at revision Revision: a later write replaces an earlier one on
// every node, in etcd's order. It is safe for concurrent use.
type DefMirror struct {
	cli  *clientv3.Client
	kind DefKind

	mu   sync.Mutex
	defs map[string]map[string]Def // bucket → name → definition
	at   revisionGate              // read once? the etcd revision reached
}

// NewDefMirror returns an empty mirror of kind's definitions; Run fills it.
func NewDefMirror(cli *clientv3.Client, kind DefKind) *DefMirror {
	return &DefMirror{cli: cli, kind: kind, defs: map[string]map[string]Def{}, at: newRevisionGate()}
}

// Run keeps the mirror up to date until ctx ends. changed is called (on
// Run's goroutine: it must not block long) with the bucket whose
// definitions changed, or "" after the whole prefix was read (at start, and
// after the watch lost its history).
func (m *DefMirror) Run(ctx context.Context, changed func(bucket string)) {
	followPrefix(ctx, m.cli, m.kind.prefix(), func(kvs []*mvccpb.KeyValue, rev int64) {
		m.load(kvs, rev)
		changed("")
	}, func(evs []*clientv3.Event, upTo int64) {
		for _, b := range m.apply(evs, upTo) {
			changed(b)
		}
	})
}

// load replaces what the mirror holds with kvs, the whole prefix at rev.
func (m *DefMirror) load(kvs []*mvccpb.KeyValue, rev int64) {
	defs := map[string]map[string]Def{}
	for _, kv := range kvs {
		if d, ok := m.def(kv.Key, kv.Value, kv.ModRevision); ok {
			if defs[d.Bucket] == nil {
				defs[d.Bucket] = map[string]Def{}
			}
			defs[d.Bucket][d.Name] = d
		}
	}
	m.mu.Lock()
	m.defs, m.at.loaded = defs, true
	m.at.moveLocked(rev)
	m.mu.Unlock()
}

// apply applies a watch response's events, the mirror then current up to
// upTo (0: not moved), and returns the buckets they touched, sorted.
func (m *DefMirror) apply(evs []*clientv3.Event, upTo int64) []string {
	touched := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		d, ok := m.def(ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
		if !ok {
			continue
		}
		touched[d.Bucket] = true
		if ev.Type == clientv3.EventTypeDelete {
			delete(m.defs[d.Bucket], d.Name)
			continue
		}
		if m.defs[d.Bucket] == nil {
			m.defs[d.Bucket] = map[string]Def{}
		}
		m.defs[d.Bucket][d.Name] = d
	}
	m.at.moveLocked(upTo)
	return slices.Sorted(maps.Keys(touched))
}

// def splits a key into its bucket and name; false for a key that is not
// a definition's.
func (m *DefMirror) def(key, value []byte, modRev int64) (Def, bool) {
	bucket, name, ok := strings.Cut(strings.TrimPrefix(string(key), m.kind.prefix()), "/")
	if !ok || bucket == "" || name == "" {
		return Def{}, false
	}
	return Def{Bucket: bucket, Name: name, Value: value, ModRevision: modRev}, true
}

// WaitRevision waits until the mirror holds etcd's state at rev or later
// (a node that wrote a definition at rev waits so before applying it).
func (m *DefMirror) WaitRevision(ctx context.Context, rev int64) error {
	return m.at.wait(ctx, &m.mu, rev, m.kind.String()+"s")
}

// Loaded reports whether the mirror has read the prefix once (before, it
// holds nothing, which does not mean etcd holds nothing).
func (m *DefMirror) Loaded() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at.loaded
}

// Bucket returns bucket's definitions, sorted by name.
func (m *DefMirror) Bucket(bucket string) []Def {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Def, 0, len(m.defs[bucket]))
	for _, d := range m.defs[bucket] {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Buckets returns the buckets that have definitions, sorted.
func (m *DefMirror) Buckets() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for b, defs := range m.defs {
		if len(defs) > 0 {
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}
