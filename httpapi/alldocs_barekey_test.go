package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAllDocsBareKeyAsItIs: a key parameter that does not start with a
// quote is the key as it is, whatever characters it holds. On the old code
// it was quoted with Go's escapes, which are not all JSON's (\x7f for a
// DEL, \U000e0001 for a non-printable character beyond the BMP; \u0085 is
// both), and such a key answered 400 "invalid UTF-8 JSON".
func TestAllDocsBareKeyAsItIs(t *testing.T) {
	f := newFixture(t)
	f.bulkLines(`{"op":"upsert","id":"a\u007fb","doc":1}
{"op":"upsert","id":"c\u0085d","doc":1}
{"op":"upsert","id":"e\udb40\udc01f","doc":1}
{"op":"upsert","id":"z","doc":1}
`)
	for _, c := range []struct{ q, ids string }{
		{"?key=a%7Fb", "a\x7fb"},
		{"?startkey=a%7F&endkey=a%7Fc", "a\x7fb"},
		{"?key=c%C2%85d", "c\u0085d"},
		{"?key=e%F3%A0%80%81f", "e\U000e0001f"},
		{`?key="a%7Fb"`, "a\x7fb"}, // as JSON, as it was
	} {
		st, _, body := f.do("GET", "/default/_all_docs"+c.q, "", "")
		var page struct {
			Rows []struct {
				ID string `json:"id"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil || st != 200 {
			t.Errorf("%s: %d %v %s", c.q, st, err, body)
			continue
		}
		var ids []string
		for _, r := range page.Rows {
			ids = append(ids, r.ID)
		}
		if got := strings.Join(ids, " "); got != c.ids {
			t.Errorf("%s: rows %q, want %q", c.q, got, c.ids)
		}
	}
}
