// Package typeddoc gives bleve a document whose type is set apart from its
// fields: the search package's indexes under Couchbase's doc_config docid
// modes type a document by its key, not by a field.
package typeddoc

// Fields are a document's fields (its JSON object).
type Fields map[string]any

// Doc is a document of a given type. bleve asks it its type (BleveType)
// rather than reading the mapping's type field, and walks its fields as
// the document's own: the embedded Fields' tag names no field (an
// embedded field must be of an exported type for bleve's reflection to
// read it), and the type, unexported, is not walked.
type Doc struct {
	Fields `json:",inline"`
	typ    string
}

// New returns the document of fields typed typ.
func New(fields map[string]any, typ string) Doc { return Doc{Fields: fields, typ: typ} }

// BleveType returns the document's type (bleve's classifier).
func (d Doc) BleveType() string { return d.typ }
