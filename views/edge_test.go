package views_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/views"
)

// idsOf lists the ids of a map answer's rows, in order.
func idsOf(answer string) string {
	var ids []string
	for _, part := range strings.Split(answer, `"id":"`)[1:] {
		ids = append(ids, part[:strings.IndexByte(part, '"')])
	}
	return strings.Join(ids, ",")
}

// Documents "20"…"24" each emit keys 0, 1 and 2: the document id bounds
// apply to each of `keys` (issue: keys ignored them), and an empty
// endkey_docid/startkey_docid is the empty id, not an absent parameter.
func TestDocIDBoundsWithKeysAndEmptyIDs(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"m":{"map":"function (doc, meta) { emit(0, null); emit(1, null); emit(2, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	for i := 20; i <= 24; i++ {
		e.put(fmt.Sprint(i), `{}`)
	}
	run := func(params string, body string) string {
		t.Helper()
		q, _ := url.ParseQuery(params)
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		p, err := views.ParseParams(q, b)
		if err != nil {
			t.Fatalf("%s: %v", params, err)
		}
		prep, err := e.svc.Prepare(ctx, "default", "d", "m", p)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if err := prep.Run(ctx, &sb); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}
	for _, c := range []struct{ params, body, want string }{
		{"stale=false&startkey_docid=21&endkey_docid=23", `{"keys":[0]}`, "21,22,23"},
		{"stale=false&startkey=0&endkey=0&startkey_docid=21&endkey_docid=23", "", "21,22,23"},
		{"stale=false&startkey_docid=22", `{"keys":[1,0]}`, "22,23,24,22,23,24"},
		{"stale=false&descending=true&startkey_docid=23&endkey_docid=21", `{"keys":[2]}`, "23,22,21"},
		{"stale=false&endkey=0&endkey_docid=", "", ""},
		{"stale=false&endkey=1&endkey_docid=", "", "20,21,22,23,24"},
		{"stale=false&startkey=2&startkey_docid=", "", "20,21,22,23,24"},
		{"stale=false&descending=true&startkey=2&startkey_docid=", "", "24,23,22,21,20,24,23,22,21,20"},
	} {
		if got := idsOf(run(c.params, c.body)); got != c.want {
			t.Errorf("%s %s: ids %q, want %q", c.params, c.body, got, c.want)
		}
	}
}

// A POST body that is not a JSON object is a 400 bad_request, as Couchbase
// answers.
func TestPostBodyMustBeObject(t *testing.T) {
	for _, body := range []string{`[]`, `1`, `"keys"`, `null`} {
		_, err := views.ParseParams(url.Values{}, []byte(body))
		var qe *views.QueryError
		if !errors.As(err, &qe) || !strings.Contains(err.Error(), "Request body must be a JSON object") {
			t.Errorf("body %s: %v", body, err)
		}
	}
	if _, err := views.ParseParams(url.Values{}, []byte(`{"keys":["a"]}`)); err != nil {
		t.Errorf("an object body: %v", err)
	}
}

// Built-in reduce names are matched exactly: "_sum " and "_sum\n" are refused
// with Couchbase's reason.
func TestReduceNamesExact(t *testing.T) {
	for _, red := range []string{`"_sum "`, `"_sum\n"`, `" _count"`, `"_Sum"`} {
		_, err := views.ParseDesignDoc("_design/d", []byte(`{"views":{"v":{"map":"function (doc) { emit(1, 1); }","reduce":`+red+`}}}`))
		var de *views.DesignDocError
		if !errors.As(err, &de) || !strings.Contains(de.Reason, "Invalid built-in reduce function for view `v'") {
			t.Errorf("reduce %s: %v", red, err)
		}
	}
	if _, err := views.ParseDesignDoc("_design/d", []byte(`{"views":{"v":{"map":"function (doc) { emit(1, 1); }","reduce":"_sum"}}}`)); err != nil {
		t.Errorf("_sum: %v", err)
	}
}

// A design document's revision counts its changes and survives a restart.
func TestDesignDocRevisionSurvivesRestart(t *testing.T) {
	e := newEnvSync(t, views.Options{}, true)
	ctx := context.Background()
	var revs []string
	for _, m := range []string{"emit(doc.a)", "emit(doc.b)"} {
		d, err := e.svc.PutDesignDoc(ctx, "default", "r", []byte(`{"views":{"v":{"map":"function (doc) { `+m+`; }"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, d.Rev)
	}
	if !strings.HasPrefix(revs[0], "1-") || !strings.HasPrefix(revs[1], "2-") {
		t.Fatalf("revisions %q", revs)
	}
	e.close()
	e.open()
	d, err := e.svc.DesignDoc(ctx, "default", "r")
	if err != nil || d.Rev != revs[1] {
		t.Fatalf("after restart: %v %q, want %q", err, d.Rev, revs[1])
	}
	if d, err := e.svc.PutDesignDoc(ctx, "default", "r", d.Body); err != nil || !strings.HasPrefix(d.Rev, "3-") {
		t.Errorf("third change: %v %+v", err, d)
	}
}

// TestErrorParamAsSpelled: an error found once the view is known names the
// parameter as the query spelled it (startkey or start_key, group or
// group_level), as the README promises; it named start_key and group
// whatever the query had said.
func TestErrorParamAsSpelled(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"m":{"map":"function (doc, meta) { emit(meta.id, null); }"},"r":{"map":"function (doc, meta) { emit(meta.id, 1); }","reduce":"_count"}}}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ view, params, body, want string }{
		{"m", `keys=["a"]&startkey="a"`, "", "startkey"},
		{"m", `keys=["a"]&start_key="a"`, "", "start_key"},
		{"m", `endkey="a"`, `{"keys":["a"]}`, "endkey"},
		{"m", `startkey="b"&endkey="a"`, "", "startkey"},
		{"m", `start_key="b"&end_key="a"`, "", "start_key"},
		{"m", `descending=true&startkey="a"&endkey="b"`, "", "startkey"},
		{"m", `startkey="a"&endkey="a"&startkey_docid=b&endkey_docid=a`, "", "startkey_docid"},
		{"m", `startkey="a"&endkey="a"&start_key_doc_id=b&endkey_docid=a`, "", "start_key_doc_id"},
		{"r", `reduce=false&group_level=1`, "", "group_level"},
		{"r", `reduce=false&group=true`, "", "group"},
	} {
		q, _ := url.ParseQuery(c.params)
		var b []byte
		if c.body != "" {
			b = []byte(c.body)
		}
		p, err := views.ParseParams(q, b)
		if err == nil {
			_, err = e.svc.Prepare(ctx, "default", "d", c.view, p)
		}
		var qe *views.QueryError
		if !errors.As(err, &qe) || qe.Param != c.want {
			t.Errorf("%s %s on %s: %v, want a QueryError with param %q", c.params, c.body, c.view, err, c.want)
		}
	}
}
