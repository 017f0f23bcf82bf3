package engine

import (
	"hash/crc32"
	"strings"
	"testing"
)

// The partition of a key is on disk (each document's record names it): the
// string hash must be crc32.ChecksumIEEE exactly, or reopened data would be
// looked for in the wrong partition.
func TestCRC32IEEEMatchesHashCRC32(t *testing.T) {
	keys := []string{"", "a", "key:0", "key:999", "user::42", "ünïcödé-ключ", strings.Repeat("k", 250), "\x00\xff\r\n"}
	for i := range 2000 {
		keys = append(keys, strings.Repeat(string(rune('a'+i%26)), i%300))
	}
	for _, k := range keys {
		if got, want := crc32IEEE(k), crc32.ChecksumIEEE([]byte(k)); got != want {
			t.Fatalf("crc32IEEE(%q) = %#x, want %#x", k, got, want)
		}
	}
}

// Every read and write hashes its key: that must not allocate.
func TestPartitionOfDoesNotAllocate(t *testing.T) {
	key := strings.Repeat("x", 100)
	var sink uint16
	if n := testing.AllocsPerRun(100, func() { sink += partitionOf(key, 1024) }); n != 0 {
		t.Errorf("partitionOf allocates %v times per call, want 0", n)
	}
}
