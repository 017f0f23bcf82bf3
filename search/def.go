package search

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/mayflydb/mayfly/engine"
)

// DefPrefix starts the key of every index definition among a bucket's system
// documents: an index named N is stored as "_search/N".
const DefPrefix = "_search/"

// IndexType is the type of a full-text index definition, as Couchbase names
// it.
const IndexType = "fulltext-index"

// AliasType is the type of an index alias definition, as Couchbase names
// it: {"type": "fulltext-alias", "params": {"targets": {"idx1": {}, ...}}}.
// A query of an alias searches its targets together, merging their hits,
// totals and facets.
const AliasType = "fulltext-alias"

// expField is the field every indexed document that expires carries: its
// expiration (absolute Unix seconds) as one keyword term of expDigits
// decimal digits, zero-padded so that terms sort as the numbers do (see
// expTerm). A document that never expires has none. It is indexed but not
// stored, so it never shows in a hit's fields; a document field of the same
// name is overwritten or removed.
const expField = "_mayfly_exp"

// expDigits is the width of an expiration term: Unix seconds up to the year
// 33658.
const expDigits = 12

// expTerm is the term of expiration exp (> 0) in expField.
func expTerm(exp int64) string {
	var b [expDigits]byte
	for i := expDigits - 1; i >= 0; i-- {
		b[i] = byte('0' + exp%10)
		exp /= 10
	}
	return string(b[:])
}

// formatVersion names how Mayfly lays out what it adds to an index (the
// expiration field, a body's top-level "_id" left out); it is part of
// every definition's signature, so that index files laid out another way
// are rebuilt when they open. 1: numeric _mayfly_exp on every document;
// 2: a body's "_id" indexed, and taken by bleve for the document's id.
const formatVersion = "3"

// validName is Couchbase's rule for index names.
var validName = regexp.MustCompile(`^[A-Za-z][0-9A-Za-z_\-]*$`)

// ValidIndexName reports whether name can name an index: a letter, then
// letters, digits, '_' and '-', as Couchbase requires.
func ValidIndexName(name string) bool { return len(name) <= 200 && validName.MatchString(name) }

// IndexDef is an index definition in Couchbase's shape:
//
//	{"type": "fulltext-index", "name": "travel", "sourceType": "couchbase",
//	 "sourceName": "travel-sample", "params": {"mapping": {...}}}
//
// params.mapping is a bleve index mapping (omitted: a dynamic mapping that
// indexes every field, bleve.NewIndexMapping()); params.doc_config.type_field
// (with mode "type_field") names the field that picks a document's type
// mapping. Only the documents of _default._default are indexed, unless
// sourceCollection names another collection as "scope.collection" (a Mayfly
// extension), or params.doc_config.mode is Couchbase 7's
// "scope.collection.type_field" with type mappings named "scope.collection"
// or "scope.collection.TYPE", all of one collection (see scopedTypes).
// Other fields of the definition are kept as given.
type IndexDef struct {
	Type             string          `json:"type"`
	Name             string          `json:"name"`
	UUID             string          `json:"uuid,omitempty"`
	SourceType       string          `json:"sourceType"`
	SourceName       string          `json:"sourceName"`
	SourceCollection string          `json:"sourceCollection,omitempty"`
	Params           json.RawMessage `json:"params,omitempty"`

	// Body is the definition as stored and returned by GetIndex.
	Body json.RawMessage `json:"-"`

	mapping  *mapping.IndexMappingImpl // as given (defaults filled in); nil for an alias
	typer    docTyper                  // picks a document's type by its key (doc_config docid modes)
	prevUUID string                    // the uuid the client's definition named (see checkPrevUUID)
	sig      string                    // identifies what the index holds
	targets  []string                  // an alias's target indexes, sorted
}

// IsAlias reports whether d defines an index alias.
func (d *IndexDef) IsAlias() bool { return d.Type == AliasType }

// Targets returns an alias's target index names, sorted (nil for an index).
func (d *IndexDef) Targets() []string { return append([]string(nil), d.targets...) }

// params is what Mayfly reads of an index definition's params.
type params struct {
	Mapping   json.RawMessage `json:"mapping"`
	DocConfig struct {
		Mode           string `json:"mode"`
		TypeField      string `json:"type_field"`
		DocIDPrefixDel string `json:"docid_prefix_delim"`
		DocIDRegexp    string `json:"docid_regexp"`
	} `json:"doc_config"`
}

// docTyper picks a document's type (the type mapping bleve applies to it)
// from its key, as Couchbase's doc_config modes "docid_prefix" (the key up
// to the first docid_prefix_delim) and "docid_regexp" (the first match of
// docid_regexp in the key) do. The zero value leaves the type to the
// mapping's type field.
type docTyper struct {
	mode  string         // "docid_prefix", "docid_regexp", or "" (the type field)
	delim string         // docid_prefix's delimiter
	re    *regexp.Regexp // docid_regexp's expression
}

// byKey reports whether the type comes from the key.
func (t docTyper) byKey() bool { return t.mode != "" }

// keyType returns the type of the document of key, or def when the key
// names none (no delimiter after a non-empty prefix, no match).
func (t docTyper) keyType(key, def string) string {
	switch t.mode {
	case "docid_prefix":
		if i := strings.Index(key, t.delim); t.delim != "" && i > 0 {
			return key[:i]
		}
	case "docid_regexp":
		if m := t.re.FindString(key); m != "" {
			return m
		}
	}
	return def
}

// sigPart is what the typer adds to a definition's signature: nothing for
// the type field (so that the signatures of indexes built before the docid
// modes existed stay the same).
func (t docTyper) sigPart() string {
	switch t.mode {
	case "docid_prefix":
		return "\x00docid_prefix\x00" + t.delim
	case "docid_regexp":
		return "\x00docid_regexp\x00" + t.re.String()
	}
	return ""
}

// parseDocConfig checks params.doc_config's mode and returns the typer of
// its docid modes. The "scope.collection." modes are scopedTypes'.
func parseDocConfig(p params) (docTyper, error) {
	dc := p.DocConfig
	switch mode := dc.Mode; {
	case mode == "" || mode == "type_field" || strings.HasPrefix(mode, "scope.collection."):
		return docTyper{}, nil
	case mode == "docid_prefix":
		return docTyper{mode: mode, delim: dc.DocIDPrefixDel}, nil
	case mode == "docid_regexp":
		re, err := regexp.Compile(dc.DocIDRegexp)
		if err != nil {
			return docTyper{}, &DefError{Reason: fmt.Sprintf("doc_config.docid_regexp %q does not compile: %v", dc.DocIDRegexp, err), Err: err}
		}
		return docTyper{mode: mode, re: re}, nil
	default:
		return docTyper{}, defErr("doc_config.mode %q is not supported; use \"type_field\", \"docid_prefix\", \"docid_regexp\" or \"scope.collection.type_field\"", mode)
	}
}

// ParseIndexDef validates an index definition for an index called name in
// bucket: the name must be valid and match the body's (if any), the source
// must be the bucket, and the mapping must be one bleve accepts. Errors are
// *DefError. Missing type, name, sourceType and sourceName are filled in; a
// new uuid is given.
func ParseIndexDef(bucket, name string, body []byte) (*IndexDef, error) {
	if !ValidIndexName(name) {
		return nil, defErr("index name %q is not valid: it must start with a letter and hold only letters, digits, '_' and '-'", name)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, &DefError{Reason: "the index definition is not a JSON object", Err: err}
	}
	d := &IndexDef{}
	if err := json.Unmarshal(body, d); err != nil {
		return nil, &DefError{Reason: "the index definition does not parse: " + err.Error(), Err: err}
	}
	d.prevUUID = d.UUID
	switch {
	case d.Type == "":
		d.Type = IndexType
	case d.Type != IndexType && d.Type != AliasType:
		return nil, defErr("type %q is not supported; use %q or %q", d.Type, IndexType, AliasType)
	}
	switch {
	case d.Name == "":
		d.Name = name
	case d.Name != name:
		return nil, defErr("the definition names index %q, the request %q", d.Name, name)
	}
	if d.IsAlias() {
		return parseAliasDef(bucket, raw, d)
	}
	switch d.SourceType {
	case "":
		d.SourceType = "couchbase"
	case "couchbase", "gocbcore":
	default:
		return nil, defErr("sourceType %q is not supported; use \"couchbase\"", d.SourceType)
	}
	if err := d.checkSourceName(bucket); err != nil {
		return nil, err
	}
	if d.SourceCollection != "" {
		if _, _, ok := splitCollection(d.SourceCollection); !ok {
			return nil, defErr("sourceCollection %q is not \"scope.collection\"", d.SourceCollection)
		}
	}
	var p params
	if len(d.Params) > 0 && string(d.Params) != "null" {
		if err := json.Unmarshal(d.Params, &p); err != nil {
			return nil, &DefError{Reason: "params do not parse: " + err.Error(), Err: err}
		}
	}
	typer, err := parseDocConfig(p)
	if err != nil {
		return nil, err
	}
	m, err := parseMapping(p)
	if err != nil {
		return nil, err
	}
	scoped, err := scopedTypes(p, m)
	if err != nil {
		return nil, err
	}
	if scoped != "" {
		if d.SourceCollection != "" && d.SourceCollection != scoped {
			return nil, defErr("sourceCollection %q is not %q, the collection the type mappings name", d.SourceCollection, scoped)
		}
		d.SourceCollection = scoped
	}
	d.mapping, d.typer = m, typer
	canon, err := json.Marshal(m)
	if err != nil {
		return nil, &DefError{Reason: "the mapping does not encode: " + err.Error(), Err: err}
	}
	sum := sha256.Sum256(append(append(append(append(canon, 0), d.SourceCollection...), 0, formatVersion[0]), typer.sigPart()...))
	d.sig = hex.EncodeToString(sum[:16])

	return finishDef(raw, d)
}

// finishDef gives d a new uuid and its body: raw with the filled-in fields.
func finishDef(raw map[string]json.RawMessage, d *IndexDef) (*IndexDef, error) {
	var err error
	var u [16]byte
	rand.Read(u[:])
	d.UUID = hex.EncodeToString(u[:])
	for k, v := range map[string]string{"type": d.Type, "name": d.Name, "uuid": d.UUID, "sourceType": d.SourceType, "sourceName": d.SourceName} {
		raw[k], _ = json.Marshal(v)
	}
	if d.Body, err = json.Marshal(raw); err != nil {
		return nil, &DefError{Reason: err.Error(), Err: err}
	}
	return d, nil
}

// checkSourceName gives d sourceName bucket when it names none, and refuses
// any other bucket: an index (or alias) reads only its own bucket.
func (d *IndexDef) checkSourceName(bucket string) error {
	switch {
	case d.SourceName == "":
		d.SourceName = bucket
	case d.SourceName != bucket:
		return defErr("sourceName %q is not bucket %q", d.SourceName, bucket)
	}
	return nil
}

// sourceError turns the failure to find the bucket a new definition names
// into a *DefError (a refused definition, as cbft refuses an index whose
// source bucket does not exist), its reason holding ns_server's "non existent bucket",
// which Couchbase's SDKs read as SourceNotFound. It still wraps err, so
// errors.Is(err, engine.ErrBucketNotFound) holds. Other errors pass as
// they are.
func sourceError(bucket string, err error) error {
	if !errors.Is(err, engine.ErrBucketNotFound) {
		return err
	}
	return &DefError{Reason: fmt.Sprintf("sourceName %q: non existent bucket", bucket), Err: err}
}

// parseAliasDef validates an alias definition: sourceType "nil" (or none),
// sourceName the bucket (or none), and params.targets naming at least one
// index. Whether the targets exist is PutIndex's business.
func parseAliasDef(bucket string, raw map[string]json.RawMessage, d *IndexDef) (*IndexDef, error) {
	switch d.SourceType {
	case "", "nil":
		d.SourceType = "nil"
	default:
		return nil, defErr("an alias has sourceType \"nil\", not %q", d.SourceType)
	}
	if err := d.checkSourceName(bucket); err != nil {
		return nil, err
	}
	if d.SourceCollection != "" {
		return nil, defErr("an alias has no sourceCollection; its targets name theirs")
	}
	var p struct {
		Targets map[string]json.RawMessage `json:"targets"`
	}
	if len(d.Params) > 0 && string(d.Params) != "null" {
		if err := json.Unmarshal(d.Params, &p); err != nil {
			return nil, &DefError{Reason: "params do not parse: " + err.Error(), Err: err}
		}
	}
	if len(p.Targets) == 0 {
		return nil, defErr("an alias needs params.targets, naming at least one index")
	}
	for _, t := range sortedKeys(p.Targets) {
		if !ValidIndexName(t) {
			return nil, defErr("target %q is not a valid index name", t)
		}
		if t == d.Name {
			return nil, defErr("an alias cannot target itself")
		}
		d.targets = append(d.targets, t)
	}
	d.sig = AliasType
	return finishDef(raw, d)
}

// loadIndexDef parses a stored definition (already validated once).
func loadIndexDef(bucket, name string, body []byte) (*IndexDef, error) {
	d := &IndexDef{}
	if err := json.Unmarshal(body, d); err != nil {
		return nil, &DefError{Reason: "the stored index definition does not parse: " + err.Error(), Err: err}
	}
	uuid := d.UUID
	d, err := ParseIndexDef(bucket, name, body)
	if err != nil {
		return nil, err
	}
	d.UUID, d.prevUUID = uuid, ""
	d.Body = bytes.Clone(body)
	return d, nil
}

// checkPrevUUID refuses a definition that names the uuid of a definition
// (cbft's prevIndexUUID: the one the client read and edited) other than
// the current one of its index, stored as cur (nil: none): the index
// changed since the client read it. A definition naming no uuid, or "*",
// replaces whatever is there, and one naming a uuid creates an index that
// does not exist. The reason is cbft's, which gocbcore's error decoder
// (and the Rust SDK's) read as their index-exists error.
func checkPrevUUID(d *IndexDef, cur []byte) error {
	if d.prevUUID == "" || d.prevUUID == "*" || cur == nil {
		return nil
	}
	var c struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(cur, &c); err != nil || c.UUID == d.prevUUID {
		return nil
	}
	return defErr("perhaps there was concurrent index definition update, current index UUID: %s, did not match input UUID: %s", c.UUID, d.prevUUID)
}

// parseMapping builds and validates the bleve mapping of p.
func parseMapping(p params) (*mapping.IndexMappingImpl, error) {
	m := bleve.NewIndexMapping()
	if len(p.Mapping) > 0 && string(p.Mapping) != "null" {
		if err := json.Unmarshal(p.Mapping, m); err != nil {
			return nil, &DefError{Reason: "params.mapping is not a valid bleve mapping: " + err.Error(), Err: err}
		}
	}
	if p.DocConfig.Mode == "type_field" && p.DocConfig.TypeField != "" {
		m.TypeField = p.DocConfig.TypeField
	}
	if err := m.Validate(); err != nil {
		return nil, &DefError{Reason: "params.mapping is not valid: " + err.Error(), Err: err}
	}
	if err := probeAnalyzers(m); err != nil {
		return nil, err
	}
	return m, nil
}

// probeTexts are what probeAnalyzers analyses: words, one letter, nothing,
// digits and punctuation, and text of several scripts.
func probeTexts() [][]byte {
	return [][]byte{
		[]byte("The Quick brown fox, jumps over the lazy dog's 12345 tails."),
		[]byte("a"),
		{},
		[]byte("x  y-z_1 2.5 e-mail@example.com http://example.com/a?b=c"),
		[]byte("Größe café naïve 日本語のテキスト Ελληνικά русский"),
	}
}

// probeAnalyzers analyses a few texts with each custom analyzer of m and
// refuses the mapping if one panics. bleve checks that the parts of a
// custom analyzer exist, not their settings: an ngram or edge_ngram filter
// of negative sizes, a shingle filter of size 0 or a truncate_token filter
// of negative length panic on the first token, in scorch's analysis
// goroutine when a document is indexed, which stops the process (and every
// restart after it, the index catching up again).
func probeAnalyzers(m *mapping.IndexMappingImpl) (err error) {
	for _, name := range sortedKeys(m.CustomAnalysis.Analyzers) {
		a := m.AnalyzerNamed(name)
		if a == nil {
			continue // Validate names the ones that do not build
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = defErr("analyzer %q fails on text (%v): check the settings of its tokenizer and filters (sizes and lengths of 1 or more)", name, p)
				}
			}()
			for _, text := range probeTexts() {
				a.Analyze(text)
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// scopedTypes applies Couchbase 7's doc_config mode
// "scope.collection.type_field" to m: its type mappings are named
// "scope.collection" (every document of the collection) or
// "scope.collection.TYPE" (the documents of the collection whose type field
// is TYPE). They must all name one collection, which it returns; m is
// rewritten to the single-collection form (the "scope.collection" mapping,
// if any, becomes the default mapping, which is otherwise disabled; the
// others are named TYPE). Another mode returns "".
func scopedTypes(p params, m *mapping.IndexMappingImpl) (string, error) {
	mode := p.DocConfig.Mode
	if !strings.HasPrefix(mode, "scope.collection.") {
		return "", nil
	}
	if mode != "scope.collection.type_field" {
		return "", defErr("doc_config.mode %q is not supported; use \"type_field\" or \"scope.collection.type_field\"", mode)
	}
	if len(m.TypeMapping) == 0 {
		return "", defErr("doc_config.mode \"scope.collection.type_field\" needs type mappings named \"scope.collection\" or \"scope.collection.type\"")
	}
	var source string
	var whole *mapping.DocumentMapping
	types := map[string]*mapping.DocumentMapping{}
	for _, name := range sortedKeys(m.TypeMapping) {
		parts := strings.SplitN(name, ".", 3)
		if len(parts) < 2 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
			return "", defErr("type mapping %q is not named \"scope.collection\" or \"scope.collection.type\"", name)
		}
		sc := parts[0] + "." + parts[1]
		if source != "" && sc != source {
			return "", defErr("the type mappings name collections %s and %s; a Mayfly index indexes one collection (define one index per collection)", source, sc)
		}
		source = sc
		if len(parts) == 2 {
			whole = m.TypeMapping[name]
		} else {
			types[parts[2]] = m.TypeMapping[name]
		}
	}
	m.TypeMapping = types
	if p.DocConfig.TypeField != "" {
		m.TypeField = p.DocConfig.TypeField
	}
	if whole != nil {
		m.DefaultMapping = whole
	} else {
		m.DefaultMapping = mapping.NewDocumentDisabledMapping()
	}
	return source, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// indexMapping returns the mapping the bleve index is built with: the
// definition's, plus the expiration field in the default and every type
// mapping (a keyword term, indexed, not stored, not in _all, no term
// vectors or doc values).
func (d *IndexDef) indexMapping() (*mapping.IndexMappingImpl, error) {
	b, err := json.Marshal(d.mapping)
	if err != nil {
		return nil, err
	}
	m := bleve.NewIndexMapping()
	if err := json.Unmarshal(b, m); err != nil {
		return nil, err
	}
	exp := mapping.NewTextFieldMapping()
	exp.Analyzer = keyword.Name
	exp.Store = false
	exp.IncludeTermVectors = false
	exp.IncludeInAll = false
	exp.DocValues = false
	add := func(dm *mapping.DocumentMapping) {
		if dm == nil {
			return
		}
		// The field is Mayfly's whatever the mapping says of a property of
		// its name: one disabled there would switch expiry off.
		delete(dm.Properties, expField)
		dm.AddFieldMappingsAt(expField, exp)
	}
	add(m.DefaultMapping)
	for _, tm := range m.TypeMapping {
		add(tm)
	}
	return m, nil
}

// splitCollection splits "scope.collection".
func splitCollection(s string) (scope, coll string, ok bool) {
	scope, coll, ok = strings.Cut(s, ".")
	return scope, coll, ok && scope != "" && coll != "" && !strings.Contains(coll, ".")
}

// collectionID resolves the definition's source collection in b.
func (d *IndexDef) collectionID(b *engine.Bucket) (engine.CollectionID, error) {
	if d.SourceCollection == "" {
		return engine.DefaultCollectionID, nil
	}
	scope, coll, _ := splitCollection(d.SourceCollection)
	c, err := b.Collection(scope, coll)
	if err != nil {
		return 0, err
	}
	return c.ID(), nil
}

// SourceBucket returns the bucket an index definition belongs to, for a
// caller that names no bucket (Couchbase's /api/index/{name}): its
// sourceName, or for an alias without one, the bucket of its first target
// (in name order) that is an index. A definition that names neither is a
// *DefError.
func (s *Service) SourceBucket(def []byte) (string, error) {
	var d struct {
		Type       string `json:"type"`
		SourceName string `json:"sourceName"`
		Params     struct {
			Targets map[string]json.RawMessage `json:"targets"`
		} `json:"params"`
	}
	if err := json.Unmarshal(def, &d); err != nil {
		return "", &DefError{Reason: "the index definition is not a JSON object", Err: err}
	}
	if d.SourceName == "" && d.Type == AliasType {
		// An alias lives in the bucket of its targets.
		for _, t := range sortedKeys(d.Params.Targets) {
			if b, err := s.FindIndex(t); err == nil {
				return b, nil
			}
		}
		return "", defErr("no target of the alias is an index")
	}
	if d.SourceName == "" {
		return "", defErr("sourceName (the bucket) is required")
	}
	return d.SourceName, nil
}
