package views

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/jsonstr"
	"github.com/mayflydb/mayfly/internal/rawquery"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/tidwall/gjson"
)

// Stale says whether a query waits for the index to catch up.
type Stale int

const (
	// StaleUpdateAfter answers from the index as it is, then updates it (the default).
	StaleUpdateAfter Stale = iota
	// StaleOK answers from the index as it is.
	StaleOK
	// StaleFalse brings the index up to date first.
	StaleFalse
)

// Expired says whether a query's answer holds the rows of documents whose
// expiration has passed but that the pager has not purged yet.
type Expired int

const (
	// ExpiredDefault takes the design document's options.expired, else
	// ExpiredInclude.
	ExpiredDefault Expired = iota
	// ExpiredInclude answers as Couchbase does: an expired document's rows
	// stay in map results and reductions until it is purged.
	ExpiredInclude
	// ExpiredExclude answers exactly at the query's instant: rows of expired
	// documents are left out of rows, total_rows and every reduction.
	ExpiredExclude
)

// parseExpired parses the value of the expired parameter or option.
func parseExpired(v string) (Expired, bool) {
	switch v {
	case "include":
		return ExpiredInclude, true
	case "exclude":
		return ExpiredExclude, true
	}
	return ExpiredDefault, false
}

// DefaultForecastHorizon is the horizon of a view forecast, in seconds, when
// the query gives none.
const DefaultForecastHorizon = 86400

// Params is a parsed, validated view query. JSON-valued fields hold raw JSON.
type Params struct {
	Key, StartKey, EndKey      []byte
	Keys                       [][]byte // nil: no multi-key fetch
	StartKeyDocID, EndKeyDocID string
	// StartKeyDocIDSet and EndKeyDocIDSet say the parameters were given,
	// even empty (the empty id, below every other).
	StartKeyDocIDSet, EndKeyDocIDSet bool
	InclusiveEnd                     bool
	Descending                       bool
	Limit                            int // -1: none
	Skip                             int
	Group                            bool
	GroupLevel                       int   // -1: not given
	Reduce                           *bool // nil: the view's default
	IncludeDocs                      bool
	Stale                            Stale
	OnErrorStop                      bool
	ConnectionTimeoutMS              int64 // 0: not given (DefaultConnectionTimeoutMS)
	// Expired is the expired parameter (Mayfly's own).
	Expired Expired
	// Forecast, when above 0, asks for the view's expiry forecast in
	// intervals of Forecast seconds over Horizon seconds (Mayfly's own),
	// instead of rows.
	Forecast, Horizon int64

	// startKeyName, endKeyName and startDocIDName are the parameters'
	// names as the query spelled them (startkey or start_key, ...), for
	// the errors found once the view is known; "" when not parsed.
	startKeyName, endKeyName, startDocIDName string
}

// StartKeyParam is the start key's parameter as the query spelled it
// (startkey or start_key; start_key when not parsed from a query), for an
// error naming it.
func (p *Params) StartKeyParam() string { return spelled(p.startKeyName, "start_key") }

// EndKeyParam is the end key's parameter as the query spelled it (endkey
// or end_key; end_key when not parsed from a query).
func (p *Params) EndKeyParam() string { return spelled(p.endKeyName, "end_key") }

// spelled returns name, or def when the query did not give it a name.
func spelled(name, def string) string {
	if name == "" {
		return def
	}
	return name
}

// ParseParams parses a view query's parameters: the query string, plus a POST
// body that may carry {"keys": [...]}. It checks each value on its own; Check
// then checks them against the view.
func ParseParams(q url.Values, body []byte) (*Params, error) {
	p := new(Params)
	if err := parseParams(p, rawquery.FromValues(q), body); err != nil {
		return nil, err
	}
	return p, nil
}

// ParseRawParams is ParseParams into p of the parameters url.ParseQuery
// finds in raw, a URL's RawQuery (those it can parse, as http.Request's
// URL.Query keeps them), read in place: no map of the parameters is built,
// only the values asked for are unescaped, and p can be the caller's (a
// Query keeps a copy). Errors are ParseParams'; p is then undefined.
func ParseRawParams(p *Params, raw string, body []byte) error {
	return parseParams(p, rawquery.Parse(raw), body)
}

func parseParams(p *Params, q rawquery.Query, body []byte) error {
	*p = Params{InclusiveEnd: true, Limit: -1, GroupLevel: -1}
	var err error
	// jsonParam returns the value of the first of names given, and the
	// name it was given as.
	jsonParam := func(names ...string) ([]byte, string, error) {
		for _, n := range names {
			v, ok := q.Lookup(n)
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			if !jsonstr.ValidString(v) {
				return nil, "", badRequest(n, "invalid UTF-8 JSON: %s", strconv.Quote(v))
			}
			return []byte(v), n, nil
		}
		return nil, "", nil
	}
	if p.Key, _, err = jsonParam("key"); err != nil {
		return err
	}
	if p.StartKey, p.startKeyName, err = jsonParam("startkey", "start_key"); err != nil {
		return err
	}
	if p.EndKey, p.endKeyName, err = jsonParam("endkey", "end_key"); err != nil {
		return err
	}
	if err := checkKeySize("key", p.Key); err != nil {
		return err
	}
	keys, _, err := jsonParam("keys")
	if err != nil {
		return err
	}
	var arr gjson.Result // the keys array, inside src
	src := keys
	if keys != nil {
		arr = gjson.ParseBytes(keys)
	}
	if len(body) > 0 {
		if !jsonstr.Valid(body) {
			return badRequest("keys", "the request body is not valid JSON")
		}
		if first := bytes.TrimLeft(body, " \t\r\n"); len(first) == 0 || first[0] != '{' {
			return badRequest("keys", "Request body must be a JSON object")
		}
		if k := gjson.GetBytes(body, "keys"); k.Exists() {
			if k.Index > 0 {
				src, arr = body, k // keys are read in place, not copied
			} else {
				src = []byte(k.Raw)
				arr = gjson.ParseBytes(src)
			}
		}
	}
	if src != nil {
		if !arr.IsArray() {
			return badRequest("keys", "`keys` parameter is not an array.")
		}
		if p.Keys, err = splitKeys(src, arr); err != nil {
			return err
		}
	}
	p.StartKeyDocID, p.startDocIDName, p.StartKeyDocIDSet = firstOf(q, "startkey_docid", "start_key_doc_id")
	p.EndKeyDocID, _, p.EndKeyDocIDSet = firstOf(q, "endkey_docid", "end_key_doc_id")
	boolP := func(name string, dst *bool) error {
		v, ok := q.Lookup(name)
		if !ok {
			return nil
		}
		switch strings.ToLower(v) {
		case "true":
			*dst = true
		case "false":
			*dst = false
		default:
			return parseErr(name, "Invalid boolean parameter: %s", strconv.Quote(v))
		}
		return nil
	}
	if err := boolP("inclusive_end", &p.InclusiveEnd); err != nil {
		return err
	}
	if err := boolP("descending", &p.Descending); err != nil {
		return err
	}
	if err := boolP("group", &p.Group); err != nil {
		return err
	}
	if err := boolP("include_docs", &p.IncludeDocs); err != nil {
		return err
	}
	if q.Has("reduce") {
		var r bool
		if err := boolP("reduce", &r); err != nil {
			return err
		}
		p.Reduce = &r
	}
	if q.Has("full_set") {
		var ignored bool
		if err := boolP("full_set", &ignored); err != nil {
			return err
		}
	}
	if q.Has("count") {
		return parseErr("count", "Query parameter 'count' is now 'limit'.")
	}
	uintP := func(name string) (int, bool, error) {
		s, ok := q.Lookup(name)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false, parseErr(name, "Invalid value for integer parameter: %s", strconv.Quote(s))
		}
		if n < 0 {
			return 0, false, parseErr(name, "Invalid value for positive integer parameter: %s", strconv.Quote(s))
		}
		if n > int64(^uint32(0)>>1) {
			n = int64(^uint32(0) >> 1)
		}
		return int(n), true, nil
	}
	if n, ok, err := uintP("limit"); err != nil {
		return err
	} else if ok {
		p.Limit = n
	}
	if n, ok, err := uintP("skip"); err != nil {
		return err
	} else if ok {
		p.Skip = n
	}
	if n, ok, err := uintP("group_level"); err != nil {
		return err
	} else if ok {
		p.GroupLevel = n
	}
	if v, ok := q.Lookup("stale"); ok {
		switch strings.ToLower(v) {
		case "ok":
			p.Stale = StaleOK
		case "false":
			p.Stale = StaleFalse
		case "update_after":
			p.Stale = StaleUpdateAfter
		default:
			return parseErr("stale", "stale only available as stale=ok, stale=update_after or stale=false")
		}
	}
	if q.Has("on_error") {
		switch v := q.Get("on_error"); v {
		case "continue":
		case "stop":
			p.OnErrorStop = true
		default:
			return badRequest("on_error", "Invalid value (`%s`) for the parameter `on_error`. It must be `continue` (default) or `stop`.", v)
		}
	}
	if q.Has("connection_timeout") {
		n, err := strconv.ParseInt(q.Get("connection_timeout"), 10, 64)
		if err != nil {
			return badRequest("connection_timeout", "Query parameter `connection_timeout` must be an integer")
		}
		p.ConnectionTimeoutMS = n
	}
	if q.Has("expired") {
		var ok bool
		if p.Expired, ok = parseExpired(q.Get("expired")); !ok {
			return badRequest("expired", "Invalid value (`%s`) for the parameter `expired`. It must be `include` or `exclude`.", q.Get("expired"))
		}
	}
	if err := parseForecast(q, p); err != nil {
		return err
	}
	if p.Keys != nil {
		switch {
		case p.Key != nil:
			return parseErr("key", "Query parameter `key` is not compatible with multi-get")
		case p.StartKey != nil:
			return parseErr(p.startKeyName, "Query parameter `start_key` is not compatible with multi-get")
		case p.EndKey != nil:
			return parseErr(p.endKeyName, "Query parameter `end_key` is not compatible with multi-get")
		}
	}
	if p.Group && p.GroupLevel >= 0 {
		return parseErr("group_level", "Query parameter `group_level` is not compatible with `group`")
	}
	return nil
}

// Bounds of the keys a query may ask for.
const (
	// MaxKeySize is the size a key or each of keys must stay under, in
	// bytes of JSON as sent: no emitted key can be longer (Couchbase's
	// limit, jsruntime.MaxKeySize), so a longer one is a 400.
	MaxKeySize = jsruntime.MaxKeySize
	// MaxKeysSize bounds the keys of one query: their JSON plus
	// keyOverhead bytes each, so that many tiny keys count too. More is a
	// 400.
	MaxKeysSize = 4 << 20
	// keyOverhead is what one key costs besides its JSON (its slice and
	// its range in the index).
	keyOverhead = 64
)

// checkKeySize refuses a key of MaxKeySize bytes or more.
func checkKeySize(param string, key []byte) error {
	if len(key) >= MaxKeySize {
		return badRequest(param, "a key of %d bytes of JSON: view keys are under %d bytes, so it can match nothing", len(key), MaxKeySize)
	}
	return nil
}

// splitKeys returns the elements of arr, a JSON array inside src (its Index
// the offset there), as slices of src: no key is copied. Each is checked
// against MaxKeySize and all of them against MaxKeysSize as they are found.
func splitKeys(src []byte, arr gjson.Result) ([][]byte, error) {
	keys := [][]byte{}
	var total int
	var err error
	arr.ForEach(func(_, v gjson.Result) bool {
		if v.Index < 0 || v.Index+len(v.Raw) > len(src) || string(src[v.Index:v.Index+len(v.Raw)]) != v.Raw {
			err = badRequest("keys", "`keys` could not be read")
			return false
		}
		k := src[v.Index : v.Index+len(v.Raw) : v.Index+len(v.Raw)]
		if err = checkKeySize("keys", k); err != nil {
			return false
		}
		if total += len(k) + keyOverhead; total > MaxKeysSize {
			err = badRequest("keys", "`keys` holds over %d bytes (counting %d bytes a key besides its JSON); ask in several queries", MaxKeysSize, keyOverhead)
			return false
		}
		keys = append(keys, k)
		return true
	})
	return keys, err
}

// firstOf returns the value of the first of names given, its name, and
// whether one was.
func firstOf(q rawquery.Query, names ...string) (string, string, bool) {
	for _, n := range names {
		if v, ok := q.Lookup(n); ok {
			return v, n, true
		}
	}
	return "", "", false
}

// parseForecast parses the forecast and horizon parameters into p.
func parseForecast(q rawquery.Query, p *Params) error {
	if !q.Has("forecast") {
		if q.Has("horizon") {
			return badRequest("horizon", "Query parameter `horizon` needs `forecast`")
		}
		return nil
	}
	secs := func(name string) (int64, error) {
		n, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil || n <= 0 {
			return 0, badRequest(name, "Query parameter `%s` must be a positive number of seconds, not %s", name, strconv.Quote(q.Get(name)))
		}
		return n, nil
	}
	var err error
	if p.Forecast, err = secs("forecast"); err != nil {
		return err
	}
	p.Horizon = DefaultForecastHorizon
	if q.Has("horizon") {
		if p.Horizon, err = secs("horizon"); err != nil {
			return err
		}
	}
	if n := p.Horizon / p.Forecast; n > index.MaxForecastIntervals || n == index.MaxForecastIntervals && p.Horizon%p.Forecast != 0 {
		return badRequest("forecast", "`horizon`/`forecast` is over %d intervals", index.MaxForecastIntervals)
	}
	for _, name := range []string{"group", "group_level", "include_docs", "limit", "skip"} {
		if q.Has(name) {
			return badRequest(name, "Query parameter `%s` is not compatible with `forecast`", name)
		}
	}
	return nil
}

// DefaultConnectionTimeoutMS is Couchbase's connection_timeout default,
// in milliseconds: how long a node's share of a query across nodes is
// waited for.
const DefaultConnectionTimeoutMS = 60000

// ConnectionTimeout is the connection_timeout parameter, or its default
// when not given (or not above 0).
func (p *Params) ConnectionTimeout() time.Duration {
	if p.ConnectionTimeoutMS <= 0 {
		return DefaultConnectionTimeoutMS * time.Millisecond
	}
	return time.Duration(p.ConnectionTimeoutMS) * time.Millisecond
}

// bodyJSONParams are the parameters whose values are JSON: taken from a
// POST body as they are written there.
var bodyJSONParams = map[string]bool{"key": true, "startkey": true, "start_key": true, "endkey": true, "end_key": true}

// BodyParams returns raw, a URL's RawQuery, with the parameters a POSTed
// query's body gives as members of its JSON object, as CouchDB's POST
// _all_docs and view queries take them ({"keys": [...], "include_docs":
// true, "startkey": "b", "limit": 10}): a member overrides the query
// string's parameter of its name. keys stays in the body (ParseParams reads
// it there); a key parameter's value is its JSON, a string member of
// another parameter its text, a number or boolean as written. A body that
// is not a JSON object is left to ParseParams to refuse; an array or
// object given for a parameter other than a key is refused here.
func BodyParams(raw string, body []byte) (string, error) {
	obj := gjson.ParseBytes(body)
	if len(bytes.TrimSpace(body)) == 0 || !jsonstr.Valid(body) || !obj.IsObject() {
		return raw, nil
	}
	var q url.Values
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		name := k.String()
		if name == "keys" {
			return true
		}
		var val string
		switch {
		case bodyJSONParams[name]:
			val = v.Raw
		case v.Type == gjson.String:
			val = v.String()
		case v.Type == gjson.Number, v.Type == gjson.True, v.Type == gjson.False:
			val = v.Raw
		default:
			err = badRequest(name, "the request body's %q must be a string, a number or a boolean, got %s", name, v.Raw)
			return false
		}
		if q == nil {
			if q, err = url.ParseQuery(raw); err != nil {
				err = nil // as http.Request's URL.Query: the parameters it can parse
			}
		}
		q.Set(name, val)
		return true
	})
	if err != nil || q == nil {
		return raw, err
	}
	return q.Encode(), nil
}
