package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// TestBulkTakesLargestBinaryValue: a _bulk line carries a binary value as
// "base64", which is 4/3 of the value's size, so the longest line _bulk
// takes leaves room for the base64 of the largest value a PUT takes (20
// MiB): a binary document stored by PUT goes through _bulk as well, as
// `mayfly export` writes it and `mayfly load` sends it back. A review found
// that the line limit (20 MiB + 64 KiB) counted the value's own bytes, not
// its base64, so a binary value over about 15 MiB was refused whole
// ("too_large") though a PUT stored it.
func TestBulkTakesLargestBinaryValue(t *testing.T) {
	f := newFixture(t)
	value := bytes.Repeat([]byte{0xff, 0x00, 0x01}, 16<<20/3) // 16 MiB, not JSON
	if st, _, body := f.do("PUT", "/default/docs/big", "application/octet-stream", string(value)); st != 201 {
		t.Fatalf("PUT of a %d-byte binary value: %d %.300s", len(value), st, body)
	}
	line := `{"op":"upsert","id":"big2","base64":"` + base64.StdEncoding.EncodeToString(value) + `"}` + "\n"
	res := f.bulkLines(line)
	if len(res) != 1 || res[0]["id"] != "big2" || res[0]["error"] != nil {
		t.Fatalf("_bulk upsert of the same %d-byte binary value: %v", len(value), res)
	}
	st, _, got := f.do("GET", "/default/docs/big2", "", "")
	if st != 200 || got != string(value) {
		t.Fatalf("GET of the value _bulk stored: %d, %d bytes, want %d", st, len(got), len(value))
	}
}
