package views

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/jsruntime"
)

// DesignDocPrefix starts every design document ID.
const DesignDocPrefix = "_design/"

// ViewDef is one view of a design document.
type ViewDef struct {
	Map    string `json:"map"`
	Reduce string `json:"reduce,omitempty"`
}

// DesignDoc is a parsed, validated design document.
type DesignDoc struct {
	// ID is "_design/NAME".
	ID string
	// Views by name.
	Views map[string]ViewDef
	// Body is the document as the client stored it.
	Body []byte
	// Rev is the revision, "N-<hash>" as Couchbase shows it: N counts the
	// design document's versions (every PUT, and a DELETE, adds one), the
	// hash is the first 8 hex digits of the body's SHA-256.
	Rev string
	// Expired is options.expired: whether its views' queries leave out the
	// rows of expired documents unless a query says otherwise (Mayfly's own;
	// ExpiredDefault when absent). It is not part of the Signature: changing
	// it changes answers, not the index.
	Expired Expired
}

// RevPrefix starts the key of the system document that holds a design
// document's revision ("_mayfly/rev/_design/NAME"); it outlives a delete, so
// a design document created again goes on counting.
const RevPrefix = "_mayfly/rev/"

// revNumber returns N of a revision "N-hash", 0 if rev is not one.
func revNumber(rev string) uint64 {
	n, _, ok := strings.Cut(rev, "-")
	if !ok {
		return 0
	}
	v, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// makeRev returns revision n of body.
func makeRev(n uint64, body []byte) string {
	h := sha256.Sum256(body)
	return strconv.FormatUint(n, 10) + "-" + hex.EncodeToString(h[:4])
}

// Version returns N of the design document's revision "N-hash": how many
// times it was stored or deleted (on a cluster, the version every node
// agrees on).
func (d *DesignDoc) Version() uint64 { return revNumber(d.Rev) }

// ViewNames returns the view names, sorted.
func (d *DesignDoc) ViewNames() []string {
	names := make([]string, 0, len(d.Views))
	for n := range d.Views {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sources returns the views in ViewNames order, as jsruntime wants them.
func (d *DesignDoc) sources() []jsruntime.ViewSource {
	var out []jsruntime.ViewSource
	for _, n := range d.ViewNames() {
		v := d.Views[n]
		out = append(out, jsruntime.ViewSource{Name: n, Map: v.Map, Reduce: v.Reduce})
	}
	return out
}

// Signature identifies the design document's functions: it changes exactly
// when a map or reduce function (or the set of views) changes, which is when
// the index must be rebuilt.
func (d *DesignDoc) Signature() string {
	h := sha256.New()
	for _, n := range d.ViewNames() {
		v := d.Views[n]
		fmt.Fprintf(h, "%d:%s%d:%s%d:%s", len(n), n, len(v.Map), v.Map, len(v.Reduce), v.Reduce)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidDesignDocName reports whether name (without "_design/") is acceptable.
func ValidDesignDocName(name string) bool {
	return name != "" && len(name) <= 200 && !strings.ContainsAny(name, "/\x00")
}

// ParseDesignDoc parses and validates a design document body and compiles
// every function. A refusal is a *DesignDocError with Couchbase's reasons.
func ParseDesignDoc(id string, body []byte) (*DesignDoc, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, &DesignDocError{Reason: "Content is not json."}
	}
	d := &DesignDoc{ID: id, Views: map[string]ViewDef{}, Body: append([]byte(nil), body...)}
	if lang, ok := raw["language"]; ok {
		var l string
		if json.Unmarshal(lang, &l) != nil || l != "javascript" {
			return nil, &DesignDocError{Reason: "language must be \"javascript\""}
		}
	}
	if err := parseOptions(d, raw["options"]); err != nil {
		return nil, err
	}
	vraw, ok := raw["views"]
	if !ok {
		return d, nil
	}
	var views map[string]json.RawMessage
	if err := json.Unmarshal(vraw, &views); err != nil || views == nil {
		return nil, &DesignDocError{Reason: "The field `views' is not a json object."}
	}
	for name, vr := range views {
		switch {
		case name == "":
			return nil, &DesignDocError{Reason: "View name cannot be an empty string"}
		case strings.TrimSpace(name) != name:
			return nil, &DesignDocError{Reason: fmt.Sprintf("View name `%s` cannot have leading or trailing whitespace", name)}
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(vr, &fields); err != nil || fields == nil {
			return nil, &DesignDocError{Reason: fmt.Sprintf("View `%s` is not a json object.", name)}
		}
		var v ViewDef
		m, ok := fields["map"]
		if !ok || json.Unmarshal(m, &v.Map) != nil {
			return nil, &DesignDocError{Reason: fmt.Sprintf("The `map' field for the view `%s' is missing.", name)}
		}
		if r, ok := fields["reduce"]; ok {
			if json.Unmarshal(r, &v.Reduce) != nil {
				return nil, &DesignDocError{Reason: fmt.Sprintf("The `reduce' field for the view `%s' must be a string.", name)}
			}
		}
		// Built-in reduces are named exactly, as Couchbase accepts them.
		if t := strings.TrimSpace(v.Reduce); strings.HasPrefix(t, "_") && (t != v.Reduce || (t != "_count" && t != "_sum" && t != "_stats")) {
			return nil, &DesignDocError{Reason: fmt.Sprintf("Invalid built-in reduce function for view `%s': %s", name, v.Reduce)}
		}
		v.Reduce = strings.TrimSpace(v.Reduce)
		d.Views[name] = v
	}
	if err := jsruntime.Compile(d.sources()); err != nil {
		var ce *jsruntime.CompileError
		if errors.As(err, &ce) {
			return nil, &DesignDocError{Reason: strings.TrimPrefix(ce.Error(), "jsruntime: "), Err: err}
		}
		return nil, &DesignDocError{Reason: err.Error(), Err: err}
	}
	return d, nil
}

// parseOptions reads the options of a design document that Mayfly acts on:
// options.expired ("include" or "exclude"). Other options are kept in the
// body as they are.
func parseOptions(d *DesignDoc, raw json.RawMessage) error {
	var opts map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &opts) != nil {
		return nil // not an object: not Mayfly's to judge
	}
	e, ok := opts["expired"]
	if !ok {
		return nil
	}
	var v string
	if json.Unmarshal(e, &v) == nil {
		if d.Expired, ok = parseExpired(v); ok {
			return nil
		}
	}
	return &DesignDocError{Reason: fmt.Sprintf("options.expired must be \"include\" or \"exclude\", not %s", e)}
}
