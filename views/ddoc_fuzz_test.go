package views_test

import (
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/views"
)

// FuzzParseDesignDoc: any body is either a design document or a
// *DesignDocError saying what is wrong; nothing panics, and what parses can
// be parsed again from its own body with the same signature.
func FuzzParseDesignDoc(f *testing.F) {
	for _, seed := range []string{
		`{"views":{"v":{"map":"function (doc, meta) { emit(doc.k, 1); }","reduce":"_count"}}}`,
		`{"views":{"v":{"map":"function (doc) { emit(1) }","reduce":"function (k, v, r) { return sum(v); }"}}}`,
		`{"views":{}}`,
		`{"views":{"":{"map":"x"}}}`,
		`{"views":{"v":{"map":"function (doc) { emit(1) }","reduce":"_sum "}}}`,
		`[]`, `{`, `null`, `{"views":[]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		d, err := views.ParseDesignDoc("_design/fuzz", []byte(body))
		if err != nil {
			var de *views.DesignDocError
			if !errors.As(err, &de) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		again, err := views.ParseDesignDoc("_design/fuzz", d.Body)
		if err != nil || again.Signature() != d.Signature() {
			t.Fatalf("its own body does not parse the same: %v", err)
		}
	})
}
