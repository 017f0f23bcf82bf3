package reason_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/internal/reason"
)

func TestStrip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"engine: document not found: k", "document not found: k"},
		{"engine: create bucket b: engine: invalid setting: maxTTL: must be an integer", "create bucket b: invalid setting: maxTTL: must be an integer"},
		{"views: load _design/d: jsruntime: view v: map: SyntaxError", "load _design/d: view v: map: SyntaxError"},
		{"search: engine: storage failed: write /x: no space left on device", "storage failed: write /x: no space left on device"},
		{"line 3 is not a JSON operation: json: unknown field \"x\"", "line 3 is not a JSON operation: unknown field \"x\""},
		// Plain sentences, and prefixes inside a part (a quoted key, a
		// word), are left alone.
		{"document not found", "document not found"},
		{`no such key "engine: x"`, `no such key "engine: x"`},
		{"reindex: engine: closed", "reindex: closed"},
		{"", ""},
	} {
		if got := reason.Strip(c.in); got != c.want {
			t.Errorf("Strip(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	err := fmt.Errorf("pager: run b: %w", errors.New("engine: closed"))
	if got := reason.Of(err); got != "run b: closed" {
		t.Errorf("Of(%v) = %q", err, got)
	}
	if got := reason.Of(nil); got != "" {
		t.Errorf("Of(nil) = %q", got)
	}
}
