package search_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestReplaceChecksTheUUIDGiven: a definition that names the uuid of the
// definition it was read from (cbft's prevIndexUUID: what an SDK's
// UpsertIndex sends back, and what Couchbase's console sends when it edits
// an index) replaces the index only if that is still the index's uuid.
// One read before another change is refused with cbft's reason (the SDKs
// read "current index uuid ... did not match input uuid" as IndexExists),
// and the index keeps the other change. "*" replaces whatever is there; a
// definition without a uuid replaces it as before.
func TestReplaceChecksTheUUIDGiven(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	first, err := e.svc.PutIndex(ctx, "default", "idx", []byte(`{"params":{"mapping":{"default_analyzer":"standard"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	def := func(uuid, analyzer string) []byte {
		return []byte(fmt.Sprintf(`{"uuid":%q,"params":{"mapping":{"default_analyzer":%q}}}`, uuid, analyzer))
	}
	second, err := e.svc.PutIndex(ctx, "default", "idx", def(first.UUID, "en"))
	if err != nil {
		t.Fatalf("replace naming the current uuid: %v", err)
	}
	// A client still holding the first definition.
	_, err = e.svc.PutIndex(ctx, "default", "idx", def(first.UUID, "simple"))
	var de *search.DefError
	if !errors.As(err, &de) || !strings.Contains(strings.ToLower(de.Reason), "current index uuid") || !strings.Contains(strings.ToLower(de.Reason), "did not match input uuid") {
		t.Errorf("replace naming a uuid replaced since: %v, want a DefError saying the current index uuid did not match the input uuid", err)
	}
	if _, err := e.svc.CheckIndex(ctx, "default", "idx", def(first.UUID, "simple")); !errors.As(err, &de) {
		t.Errorf("CheckIndex of a definition naming a uuid replaced since: %v, want a DefError", err)
	}
	got, err := e.svc.GetIndex(ctx, "default", "idx")
	if err != nil || got.UUID != second.UUID || !strings.Contains(string(got.Body), `"en"`) {
		t.Errorf("after the refused replace the index is %s (%v), want the second definition (uuid %s)", got.Body, err, second.UUID)
	}
	if _, err := e.svc.PutIndex(ctx, "default", "idx", def("*", "simple")); err != nil {
		t.Errorf("replace naming uuid *: %v", err)
	}
	if _, err := e.svc.PutIndex(ctx, "default", "idx", []byte(`{"params":{}}`)); err != nil {
		t.Errorf("replace naming no uuid: %v", err)
	}
}
