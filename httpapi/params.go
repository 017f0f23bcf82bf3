package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/engine"
)

// maxSettingsBody bounds a settings request body.
const maxSettingsBody = 1 << 20

// pathVar returns a decoded path variable (the router keeps paths encoded so
// keys may contain "/").
func pathVar(r *http.Request, name string) (string, error) {
	v, err := url.PathUnescape(routeVar(r, name))
	if err != nil {
		return "", errBadRequest(fmt.Sprintf("%s: bad URL escape", name))
	}
	return v, nil
}

// formParams reads a settings request's parameters from a form-encoded or JSON
// body (Couchbase's REST accepts form encoding) and the query string.
func formParams(r *http.Request) (url.Values, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, maxSettingsBody)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, errBadRequest("malformed JSON body: " + err.Error())
		}
		vals := r.URL.Query()
		for k, v := range m {
			switch x := v.(type) {
			case string:
				vals.Set(k, x)
			case float64:
				vals.Set(k, strconv.FormatFloat(x, 'f', -1, 64))
			case bool:
				vals.Set(k, strconv.FormatBool(x))
			case nil:
				vals.Set(k, "null") // a setting that takes null (collection defaultTTL) parses it
			default:
				return nil, errBadRequest(k + ": must be a string, number or boolean")
			}
		}
		return vals, nil
	}
	if ct != "" && ct != "application/x-www-form-urlencoded" {
		// ParseForm would read such a body as no parameters at all (a
		// text/plain "name=b" creating a bucket "without a name").
		return nil, &httpError{http.StatusUnsupportedMediaType, "unsupported_media_type",
			fmt.Sprintf("a body of type %s is not read here; send Content-Type: application/x-www-form-urlencoded (or application/json)", ct)}
	}
	if err := r.ParseForm(); err != nil {
		return nil, errBadRequest("malformed form body: " + err.Error())
	}
	return r.Form, nil
}

// maxExpiry is the largest expiry value a write or touch takes: Couchbase's
// expiry is 32 bits (seconds up to 30 days, else a Unix time, before 2106).
const maxExpiry = math.MaxUint32

// expiryRangeReason is the 400's reason for an expiry value (named name)
// past maxExpiry: stored as it is it would not fit a document's 32-bit
// expiration.
func expiryRangeReason(name string, v int64) string {
	return fmt.Sprintf("%s must be at most %d (an expiry is 32 bits: seconds up to 30 days, else a Unix time), got %d", name, int64(maxExpiry), v)
}

// expiryParam parses an optional expiry parameter (expiry, touch): an
// integer at most maxExpiry; ok is false when absent.
func expiryParam(vals url.Values, name string) (v int64, ok bool, err error) {
	v, ok, err = intParam(vals, name)
	if err == nil && v > maxExpiry {
		return 0, false, errBadRequest(expiryRangeReason(name, v))
	}
	return v, ok, err
}

// intParam parses an optional integer parameter; ok is false when absent.
func intParam(vals url.Values, name string) (v int64, ok bool, err error) {
	s := strings.TrimSpace(vals.Get(name))
	if !vals.Has(name) {
		return 0, false, nil
	}
	v, err = strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, errBadRequest(fmt.Sprintf("%s must be an integer, got %q", name, s))
	}
	return v, true, nil
}

// countParam parses an optional integer parameter that must not be
// negative (skip, limit); ok is false when absent.
func countParam(vals url.Values, name string) (v int64, ok bool, err error) {
	v, ok, err = intParam(vals, name)
	if err == nil && v < 0 {
		err = errBadRequest(name + " must not be negative")
	}
	return v, ok, err
}

// boolParam parses an optional boolean parameter.
func boolParam(vals url.Values, name string) (bool, error) {
	if !vals.Has(name) {
		return false, nil
	}
	switch strings.ToLower(vals.Get(name)) {
	case "true", "1", "":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errBadRequest(fmt.Sprintf("%s must be true or false, got %q", name, vals.Get(name)))
}

// bucketOf looks up the request's {bucket}.
func (s *server) bucketOf(r *http.Request) (*engine.Bucket, error) {
	name, err := pathVar(r, "bucket")
	if err != nil {
		return nil, err
	}
	b, err := s.eng.Bucket(name)
	if err != nil {
		return nil, &withErrors{err: errNotFound(fmt.Sprintf("bucket %q does not exist", name)), errors: bucketMissing()}
	}
	return b, nil
}

// closedUnder returns err marked as engine.ErrClosed (503, as every path
// answers for a closed bucket) when b is no longer the engine's bucket of
// its name: deleted or closed while the request used it, whatever its store
// answered then (a closed bbolt file says "database not open", a closed
// pebble store is a storage failure wrapping engine.ErrClosed).
func (s *server) closedUnder(b *engine.Bucket, err error) error {
	if err == nil || errors.Is(err, engine.ErrClosed) {
		return err
	}
	if cur, cerr := s.eng.Bucket(b.Name()); cerr == nil && cur == b {
		return err
	}
	return fmt.Errorf("%w: bucket %s was closed or deleted while in use: %w", engine.ErrClosed, b.Name(), err)
}

// collectionOf resolves ?collection=scope.collection (default _default._default).
func collectionOf(b *engine.Bucket, vals url.Values) (*engine.Collection, error) {
	spec := vals.Get("collection")
	if spec == "" {
		return b.DefaultCollection(), nil
	}
	scope, coll, ok := strings.Cut(spec, ".")
	if !ok {
		return nil, errBadRequest(fmt.Sprintf("collection must be scope.collection, got %q", spec))
	}
	return b.Collection(scope, coll)
}

// bucketForm looks up the request's {bucket} and reads its settings
// parameters: the start of every settings handler.
func (s *server) bucketForm(r *http.Request) (*engine.Bucket, url.Values, error) {
	b, err := s.bucketOf(r)
	if err != nil {
		return nil, nil, err
	}
	vals, err := formParams(r)
	if err != nil {
		return nil, nil, err
	}
	return b, vals, nil
}

// durabilityParam reads a document write's ?durability= level: one of
// Couchbase's four names, or absent for the bucket's durabilityMinLevel. A
// level below the bucket's minimum is raised to it (engine.WriteOptions).
func durabilityParam(q url.Values) (engine.Durability, error) {
	v := q.Get("durability")
	d, err := engine.ParseDurability(v)
	if err != nil {
		return "", errBadRequest(fmt.Sprintf("durability must be none, majority, majorityAndPersistActive or persistToMajority, got %q", v))
	}
	return d, nil
}
