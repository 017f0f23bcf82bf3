package httpapi

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestShareReader: a share read a byte at a time, or whole, gives its head
// and each row's JSON exactly, whatever the rows hold (strings with
// quotes, escapes and brackets, documents spread over lines, numbers,
// nesting); ready says a row is buffered only when it is; a share cut
// short fails with io.ErrUnexpectedEOF rather than end as if whole.
func TestShareReader(t *testing.T) {
	rows := []string{
		`{"s":0,"id":"a\"b]}","key":["x",{"y":"[{"}],"value":-1.5e3}`,
		`{"k":"q\\\\","r":{"id":"q\\\\","doc":{"a":` + "\n\t" + `[1, 2 ,{"b":null}] }}}`,
		`{"i":3,"r":{"key":7,"error":"not_found"}}`,
		`{"s":2,"key":true,"value":"é\u00e9\\n"}`,
	}
	share := "{\"total_rows\" : 12,\"desc\":true, \"more\":{\"x\":[1]},\"rows\":[ " + strings.Join(rows, " ,\r\n") + " ]\n}"
	for name, src := range map[string]func() io.Reader{
		"whole":       func() io.Reader { return strings.NewReader(share) },
		"byte a time": func() io.Reader { return iotest.OneByteReader(strings.NewReader(share)) },
	} {
		rd := &shareReader{src: src()}
		if err := rd.head(); err != nil || rd.total != 12 || !rd.desc {
			t.Fatalf("%s: head: %v, total %d, desc %v", name, err, rd.total, rd.desc)
		}
		for i, want := range rows {
			for name == "byte a time" && !rd.ready() {
				if err := rd.fill(); err != nil {
					t.Fatalf("%s: row %d never ready: %v", name, i, err)
				}
			}
			got, err := rd.row()
			if err != nil || string(got) != want {
				t.Fatalf("%s: row %d: %v\n got %s\nwant %s", name, i, err, got, want)
			}
		}
		if got, err := rd.row(); err != io.EOF {
			t.Fatalf("%s: after the rows: %q %v, want io.EOF", name, got, err)
		}
	}
	// Cut anywhere after its head, a share fails: never a short whole.
	at := strings.Index(share, "[ ") + 2
	for cut := at; cut < len(share); cut += 7 {
		rd := &shareReader{src: iotest.OneByteReader(strings.NewReader(share[:cut]))}
		if err := rd.head(); err != nil {
			t.Fatal(err)
		}
		var err error
		for err == nil {
			_, err = rd.row()
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: %v, want io.ErrUnexpectedEOF", cut, len(share), err)
		}
	}
	// A row larger than the buffer's first size grows it.
	big := `{"doc":"` + strings.Repeat("x", 100<<10) + `"}`
	rd := &shareReader{src: bytes.NewReader([]byte(`{"total_rows":1,"rows":[` + big + `]}`))}
	if err := rd.head(); err != nil {
		t.Fatal(err)
	}
	if got, err := rd.row(); err != nil || string(got) != big {
		t.Fatalf("a 100 KiB row: %v, %d bytes", err, len(got))
	}
}
