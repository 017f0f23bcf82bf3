package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestChangesContinuousFeedKeepsPrettyDocumentOnOneLine: a document stored
// as pretty-printed JSON (line ends between its members, as `curl -T
// doc.json` sends a file) comes in a continuous feed with include_docs as
// one row a line, and in an eventsource feed as one data line an event,
// since clients split those feeds at line ends. A review found that the
// stored value went out as it is, line ends included: the continuous row
// broke over two lines, neither of them JSON, and the eventsource event's
// data stopped at the first line end.
func TestChangesContinuousFeedKeepsPrettyDocumentOnOneLine(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/pretty", "application/json", "{\n  \"z\": 3,\r\n  \"w\": [1,\n 2]\n}\n"); st != 201 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	check := func(mode, line string) {
		t.Helper()
		var row struct {
			ID  string         `json:"id"`
			Doc map[string]any `json:"doc"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.ID != "pretty" || row.Doc["z"] != float64(3) {
			t.Errorf("%s feed: the row of the document is not one JSON line: %q (%v)", mode, line, err)
		}
	}
	st, _, body := f.do("GET", "/default/_changes?include_docs=true&feed=continuous&timeout=100", "", "")
	if st != 200 {
		t.Fatalf("continuous: %d %s", st, body)
	}
	check("continuous", strings.SplitN(body, "\n", 2)[0])

	st, _, body = f.do("GET", "/default/_changes?include_docs=true&feed=eventsource&timeout=100", "", "")
	if st != 200 {
		t.Fatalf("eventsource: %d %s", st, body)
	}
	// An event's data is its data: lines (here one).
	var data []string
	for line := range strings.SplitSeq(strings.SplitN(body, "\n\n", 2)[0], "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
	}
	check("eventsource", strings.Join(data, "\n"))
}
