package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// breakdown is where a server's resident memory was at one sample: the
// kernel's view (/proc/PID/smaps) beside the Go runtime's (/metrics), all
// bytes.
type breakdown struct {
	rss, anon, file int64 // resident: all, anonymous, file-backed
	index           int64 // file-backed of the view index files' mappings (*.idx, bbolt's mmap)
	// The Go runtime's: heap objects' spans in use, heap spans free but
	// resident (idle less released), stacks, everything it has mapped,
	// and its memory limit.
	heapInUse, heapFree, stacks, goSys, limit int64
	storage                                   int64 // the store's own memory (mayfly_storage_mem_used_bytes: pebble's C memory in a cgo build)
	heapAlloc                                 int64 // heap objects, live or garbage not yet swept
	gogc                                      int64 // the collector's percent now (the heap-ratio policy sets it)
}

// breakdownHeader is the sampler CSV's columns of a breakdown, MiB.
const breakdownHeader = "anon_mb,file_mb,index_map_mb,heap_inuse_mb,heap_free_mb,stacks_mb,go_sys_mb,go_limit_mb,storage_mb,heap_alloc_mb,gogc"

func (b breakdown) csv() string {
	f := []int64{b.anon, b.file, b.index, b.heapInUse, b.heapFree, b.stacks, b.goSys, b.limit, b.storage, b.heapAlloc}
	s := make([]string, len(f))
	for i, v := range f {
		s[i] = fmt.Sprintf("%.1f", mb(v))
	}
	return strings.Join(s, ",") + fmt.Sprintf(",%d", b.gogc)
}

// String is the breakdown for the report.
func (b breakdown) String() string {
	other := b.anon - b.heapInUse - b.heapFree - b.stacks - b.storage
	return fmt.Sprintf("RSS %.0f = anon %.0f + file %.0f (index mmap %.0f); anon: Go heap in use %.0f, heap free resident %.0f, stacks %.0f, store %.0f, other %.0f (Go sys %.0f, limit %.0f) MiB",
		mb(b.rss), mb(b.anon), mb(b.file), mb(b.index), mb(b.heapInUse), mb(b.heapFree), mb(b.stacks), mb(b.storage), mb(other), mb(b.goSys), mb(b.limit))
}

// smaps reads the process's resident memory by kind from /proc/PID/smaps:
// anonymous, file-backed, and the file-backed of mappings whose path ends
// with indexSuffix.
func smaps(pid int, indexSuffix string) (b breakdown, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return b, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var inIndex bool
	var rss, anon int64 // of the current mapping
	flush := func() {
		b.rss += rss
		b.anon += anon
		b.file += rss - anon
		if inIndex {
			b.index += rss - anon
		}
	}
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping's header: "addr-addr perms offset dev inode [path]"
			flush()
			rss, anon = 0, 0
			inIndex = len(f) >= 6 && strings.HasSuffix(f[len(f)-1], indexSuffix)
			continue
		}
		if len(f) < 2 {
			continue
		}
		kb, perr := strconv.ParseInt(f[1], 10, 64)
		if perr != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			rss = kb << 10
		case "Anonymous:":
			anon = kb << 10
		}
	}
	flush()
	return b, sc.Err()
}

// memBreakdown samples srv's resident memory with its Go runtime's figures.
func (s *server) memBreakdown(ctx context.Context) (breakdown, error) {
	b, err := smaps(s.pid(), ".idx")
	if err != nil {
		return b, err
	}
	g, err := s.goMemStats(ctx)
	if err != nil {
		return b, err
	}
	b.heapInUse = int64(g["go_memstats_heap_inuse_bytes"])
	b.heapFree = int64(g["go_memstats_heap_idle_bytes"] - g["go_memstats_heap_released_bytes"])
	b.stacks = int64(g["go_memstats_stack_inuse_bytes"])
	b.goSys = int64(g["go_memstats_sys_bytes"])
	b.limit = int64(g["go_gc_gomemlimit_bytes"])
	b.storage = int64(g["mayfly_storage_mem_used_bytes"])
	b.heapAlloc = int64(g["go_memstats_heap_alloc_bytes"])
	b.gogc = int64(g["go_gc_gogc_percent"])
	return b, nil
}
