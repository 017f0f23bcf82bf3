package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// docTarget resolves bucket, collection and key of a document request.
func (s *server) docTarget(r *http.Request) (*engine.Collection, string, error) {
	b, err := s.bucketOf(r)
	if err != nil {
		return nil, "", err
	}
	key, err := pathVar(r, "key")
	if err != nil {
		return nil, "", err
	}
	if err := engine.ValidateKey(key); err != nil {
		return nil, "", err
	}
	c, err := collectionOf(b, r.URL.Query())
	if err != nil {
		return nil, "", err
	}
	return c, key, nil
}

// mutationResult is the answer to a write.
type mutationResult struct {
	ID         string `json:"id"`
	CAS        uint64 `json:"cas"`
	Rev        string `json:"rev"`
	Seq        uint64 `json:"seq"`
	Expiration int64  `json:"expiration"`
}

func resultOf(d *engine.Document) mutationResult {
	return mutationResult{ID: d.Key, CAS: d.CAS, Rev: d.Rev(), Seq: d.Seq, Expiration: d.Expiration}
}

// checkDeclaredJSON refuses a body sent as application/json that is not
// valid JSON in UTF-8, saying where it breaks. A body sent as anything else
// is stored as it is: JSON becomes a json document, the rest a binary one,
// as Couchbase does (engine.DetectType); but one that would be stored as
// JSON is held to the same nesting limit (see checkJSONDepth).
func checkDeclaredJSON(r *http.Request, body []byte) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return checkJSONDepth(body, "the body")
	}
	if json.Valid(body) {
		// encoding/json takes invalid UTF-8 inside a string; JSON is UTF-8.
		if !utf8.Valid(body) {
			return errBadRequest(fmt.Sprintf("the body is sent as application/json but is not valid UTF-8 (at byte %d)", invalidUTF8At(body)))
		}
		return nil
	}
	var se *json.SyntaxError
	if err := json.Unmarshal(body, new(json.RawMessage)); errors.As(err, &se) {
		return errBadRequest(fmt.Sprintf("the body is sent as application/json but is not valid JSON: %v (at byte %d)", se, se.Offset))
	}
	return errBadRequest("the body is sent as application/json but is not valid JSON")
}

// maxJSONDepth is the deepest nesting of arrays and objects a JSON
// document may have: encoding/json's, which every answer that carries a
// document as JSON (?meta=true, include_docs, _changes) is encoded with.
const maxJSONDepth = jsonstr.MaxDepth

// checkJSONDepth refuses a value (what names it in the reason) that is
// JSON but nests arrays and objects deeper than maxJSONDepth: stored, it
// could not be read back as JSON (engine.DetectType would take it for a
// binary value). A value sent as application/json meets the same limit as
// encoding/json's "exceeded max depth". Neither check recurses, so no
// depth a client sends can run the stack out.
func checkJSONDepth(value []byte, what string) error {
	if at := jsonstr.DepthOver(value, maxJSONDepth); at >= 0 && utf8.Valid(value) && jsonstr.ValidAnyDepth(value) {
		return errBadRequest(fmt.Sprintf("%s is JSON nested deeper than %d levels (exceeded max depth at byte %d): it could not be read back as JSON", what, maxJSONDepth, at))
	}
	return nil
}

// invalidUTF8At returns the offset of b's first byte that is not part of a
// valid UTF-8 sequence, or len(b).
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// putDoc handles PUT /{bucket}/docs/{key}: ?expiry, preserve_expiry, flags,
// cas, collection, op=upsert|insert|replace, durability. The body is the value. On a
// collection with a defaultTTL, a JSON body's top-level "ttl" field sets the
// document's time to live (-1 never, n > 0 seconds after this write; anything
// else is a 400 naming the field); a non-zero ?expiry wins over it.
func (s *server) putDoc(w http.ResponseWriter, r *http.Request) error {
	c, key, err := s.docTarget(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var o engine.WriteOptions
	if o.Expiry, _, err = expiryParam(q, "expiry"); err != nil {
		return err
	}
	if o.PreserveExpiry, err = boolParam(q, "preserve_expiry"); err != nil {
		return err
	}
	flags, _, err := intParam(q, "flags")
	if err != nil || flags < 0 || flags > 0xFFFFFFFF {
		return errBadRequest("flags must be an integer from 0 to 4294967295")
	}
	o.Flags = uint32(flags)
	if o.Durability, err = durabilityParam(q); err != nil {
		return err
	}
	if cs := q.Get("cas"); cs != "" {
		if o.CAS, err = strconv.ParseUint(cs, 10, 64); err != nil {
			return errBadRequest(fmt.Sprintf("cas must be an unsigned integer, got %q", cs))
		}
	}
	op := q.Get("op")
	write := c.Upsert
	switch op {
	case "", "upsert":
	case "insert":
		write = c.Insert
	case "replace":
		write = c.Replace
	default:
		return errBadRequest(fmt.Sprintf("op must be upsert, insert or replace, got %q", op))
	}
	body, err := readDocBody(w, r)
	if err != nil {
		return err
	}
	if err := checkDeclaredJSON(r, body); err != nil {
		return err
	}
	d, err := write(r.Context(), key, body, &o)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if d.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, resultOf(d))
	return nil
}

// getDoc handles GET /{bucket}/docs/{key}: the raw value with metadata
// headers, ?meta=true for a JSON envelope, ?touch=E for get-and-touch. On a
// collection with idleTTL or maxLifetime a read slides the document's
// expiration (engine.Collection.Get); the headers and envelope show the
// version read, the extension becomes visible once committed.
func (s *server) getDoc(w http.ResponseWriter, r *http.Request) error {
	c, key, err := s.docTarget(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	// Every parameter is checked before the touch: a refused request
	// leaves the document as it was.
	withMeta, err := boolParam(q, "meta")
	if err != nil {
		return err
	}
	var d *engine.Document
	if q.Has("touch") {
		exp, _, perr := expiryParam(q, "touch")
		if perr != nil {
			return perr
		}
		lvl, perr := durabilityParam(q)
		if perr != nil {
			return perr
		}
		d, err = c.TouchWith(r.Context(), key, &engine.WriteOptions{Expiry: exp, Durability: lvl})
	} else {
		d, err = c.Get(r.Context(), key)
	}
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("X-Mayfly-Cas", strconv.FormatUint(d.CAS, 10))
	h.Set("X-Mayfly-Expiration", strconv.FormatInt(d.Expiration, 10))
	h.Set("X-Mayfly-Flags", strconv.FormatUint(uint64(d.Flags), 10))
	if withMeta {
		writeJSON(w, http.StatusOK, docEnvelope(d))
		return nil
	}
	if d.Type == engine.TypeJSON {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "application/octet-stream")
	}
	w.WriteHeader(http.StatusOK)
	w.Write(d.Value)
	return nil
}

// docMeta is a document's metadata as the API shows it.
type docMeta struct {
	ID         string `json:"id"`
	Rev        string `json:"rev"`
	CAS        uint64 `json:"cas"`
	Seq        uint64 `json:"seq"`
	Expiration int64  `json:"expiration"`
	Flags      uint32 `json:"flags"`
	Type       string `json:"type"`
	// TS is the Unix time of the last write of the value (Cosmos DB's _ts).
	TS int64 `json:"ts"`
	// Created is the Unix time of the write that made the document live.
	Created int64 `json:"created"`
}

// docEnvelope is {"meta": {...}, "json": value}; a binary value is shown
// base64-encoded under "base64" instead of "json".
func docEnvelope(d *engine.Document) map[string]any {
	out := map[string]any{"meta": docMeta{ID: d.Key, Rev: d.Rev(), CAS: d.CAS, Seq: d.Seq, Expiration: d.Expiration, Flags: d.Flags, Type: string(d.Type), TS: d.TS, Created: d.CreatedAt}}
	if d.Type == engine.TypeJSON {
		out["json"] = json.RawMessage(d.Value)
	} else {
		// encoding/json writes []byte as base64, and a nil one (an empty
		// value) as null: an empty value is "".
		out["base64"] = append([]byte{}, d.Value...)
	}
	return out
}

// deleteDoc handles DELETE /{bucket}/docs/{key} (?cas= and ?durability=
// optional).
func (s *server) deleteDoc(w http.ResponseWriter, r *http.Request) error {
	c, key, err := s.docTarget(r)
	if err != nil {
		return err
	}
	var o engine.WriteOptions
	if o.Durability, err = durabilityParam(r.URL.Query()); err != nil {
		return err
	}
	if cs := r.URL.Query().Get("cas"); cs != "" {
		if o.CAS, err = strconv.ParseUint(cs, 10, 64); err != nil {
			return errBadRequest(fmt.Sprintf("cas must be an unsigned integer, got %q", cs))
		}
	}
	d, err := c.Delete(r.Context(), key, &o)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resultOf(d))
	return nil
}

// touchDoc handles POST /{bucket}/docs/{key}/touch?expiry=E (and
// ?durability=).
func (s *server) touchDoc(w http.ResponseWriter, r *http.Request) error {
	c, key, err := s.docTarget(r)
	if err != nil {
		return err
	}
	exp, ok, err := expiryParam(r.URL.Query(), "expiry")
	if err != nil {
		return err
	}
	if !ok {
		return errBadRequest("expiry is required")
	}
	lvl, err := durabilityParam(r.URL.Query())
	if err != nil {
		return err
	}
	d, err := c.TouchWith(r.Context(), key, &engine.WriteOptions{Expiry: exp, Durability: lvl})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resultOf(d))
	return nil
}

// readDocBody reads a document write's body, at most engine.MaxValueLen
// bytes.
func readDocBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if k, ok := r.Body.(*keptBody); ok {
		if body, ok := k.take(); ok {
			return body, nil // read, and its size checked, by replayableBody
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, engine.MaxValueLen))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: the body is over %d bytes", engine.ErrValueTooLarge, engine.MaxValueLen)
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return nil, err // 408: the body did not arrive within --read-timeout
		}
		return nil, errBadRequest("reading the body: " + err.Error())
	}
	return body, nil
}
