package memcache

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line string
		want command
	}{
		{"get a b\r\n", command{kind: cmdGet, keys: []string{"a", "b"}}},
		{"gets a\r\n", command{kind: cmdGets, keys: []string{"a"}}},
		{"gat 10 a\r\n", command{kind: cmdGat, exptime: 10, keys: []string{"a"}}},
		{"gats -1 a b\r\n", command{kind: cmdGats, exptime: -1, keys: []string{"a", "b"}}},
		{"gat 10\r\n", command{kind: cmdGat, exptime: 10, keys: []string{}}},
		{"set k 1 2 3\r\n", command{kind: cmdSet, keys: []string{"k"}, flags: 1, exptime: 2, vlen: 3}},
		{"set k 1 2 3 noreply\r\n", command{kind: cmdSet, keys: []string{"k"}, flags: 1, exptime: 2, vlen: 3, noreply: true}},
		{"set k 1 2 3 whatever\r\n", command{kind: cmdSet, keys: []string{"k"}, flags: 1, exptime: 2, vlen: 3}},
		{"cas k 1 2 3 99\r\n", command{kind: cmdCas, keys: []string{"k"}, flags: 1, exptime: 2, vlen: 3, cas: 99}},
		{"cas k 1 2 3 99 noreply\r\n", command{kind: cmdCas, keys: []string{"k"}, flags: 1, exptime: 2, vlen: 3, cas: 99, noreply: true}},
		{"add k 0 -1 0\r\n", command{kind: cmdAdd, keys: []string{"k"}, exptime: -1}},
		{"set k 0 2147483648 0\r\n", command{kind: cmdSet, keys: []string{"k"}, exptime: math.MinInt32}},
		{"set k 0 0 4294967297\r\n", command{kind: cmdSet, keys: []string{"k"}, vlen: 1}},
		{"set k 0 +5 1\r\n", command{kind: cmdSet, keys: []string{"k"}, exptime: 5, vlen: 1}},
		{"incr k 5\r\n", command{kind: cmdIncr, keys: []string{"k"}, delta: 5}},
		{"decr k 5 noreply\r\n", command{kind: cmdDecr, keys: []string{"k"}, delta: 5, noreply: true}},
		{"touch k 5\r\n", command{kind: cmdTouch, keys: []string{"k"}, exptime: 5}},
		{"touch k 5 20\r\n", command{kind: cmdTouch, keys: []string{"k"}, exptime: 5}},
		{"delete k\r\n", command{kind: cmdDelete, keys: []string{"k"}}},
		{"delete k 0\r\n", command{kind: cmdDelete, keys: []string{"k"}}},
		{"delete k noreply\r\n", command{kind: cmdDelete, keys: []string{"k"}, noreply: true}},
		{"delete k 0 noreply\r\n", command{kind: cmdDelete, keys: []string{"k"}, noreply: true}},
		{"flush_all\r\n", command{kind: cmdFlushAll, countFlush: true}},
		{"flush_all noreply\r\n", command{kind: cmdFlushAll, noreply: true, countFlush: true}},
		{"flush_all 10\r\n", command{kind: cmdFlushAll, exptime: 10, hasDelay: true, countFlush: true}},
		{"flush_all 10 noreply\r\n", command{kind: cmdFlushAll, exptime: 10, hasDelay: true, noreply: true, countFlush: true}},
		{"flush_all 1 2\r\n", command{kind: cmdFlushAll, exptime: 1, hasDelay: true, countFlush: true}},
		{"stats\r\n", command{kind: cmdStats}},
		{"stats settings\r\n", command{kind: cmdStats, sub: "settings"}},
		{"stats detail off\r\n", command{kind: cmdStats, sub: "detail"}},
		{"stats detail dump\r\n", command{kind: cmdStats, sub: "detail dump"}},
		{"stats detail x\r\n", command{kind: cmdInvalid, reply: replyStatsDetail}},
		{"version\r\n", command{kind: cmdVersion}},
		{"version x y\r\n", command{kind: cmdVersion}},
		{"quit\r\n", command{kind: cmdQuit}},
		{"verbosity 1\r\n", command{kind: cmdVerbosity, delta: 1}},
		{"get a\x00 b\r\n", command{kind: cmdGet, keys: []string{"a"}}}, // a C string ends at NUL
		{"get a\r\r\n", command{kind: cmdGet, keys: []string{}, reply: replyBadFormat}},
		// Rejections.
		{"", command{kind: cmdInvalid, reply: replyError}},
		{"\r\n", command{kind: cmdInvalid, reply: replyError}},
		{"g\r\n", command{kind: cmdInvalid, reply: replyError}},
		{"get\r\n", command{kind: cmdInvalid, reply: replyError}},
		{"set k 0 0\r\n", command{kind: cmdInvalid, reply: replyError}},
		{"set k x 0 1 noreply\r\n", command{kind: cmdInvalid, reply: replyBadFormat, noreply: true}},
		{"set " + strings.Repeat("k", 251) + " 0 0 1\r\n", command{kind: cmdInvalid, reply: replyBadFormat}},
		{"set a\tb 0 0 1\r\n", command{kind: cmdInvalid, reply: replyBadFormat, swallow: 3}},
		{"set a\tb x 0 1\r\n", command{kind: cmdInvalid, reply: replyBadFormat}},
		{"incr k -1\r\n", command{kind: cmdInvalid, reply: replyBadDelta}},
		{"touch k x\r\n", command{kind: cmdInvalid, reply: replyBadExptime}},
		{"delete k 1\r\n", command{kind: cmdInvalid, reply: replyBadDelete}},
		{"delete k 1 noreply\r\n", command{kind: cmdInvalid, reply: replyBadDelete, noreply: true}},
		{"flush_all noreply 5\r\n", command{kind: cmdInvalid, reply: replyBadExptime, countFlush: true}},
		{"stats nope\r\n", command{kind: cmdInvalid, reply: replyError}},
		{"shutdown\r\n", command{kind: cmdInvalid, reply: replyNoShutdown}},
		{"GET / HTTP/1.1\r\n", command{kind: cmdInvalid, close: true}},
	}
	for _, tt := range tests {
		got := parseCommand([]byte(tt.line))
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseCommand(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
		}
	}
}

func TestSafeStrto(t *testing.T) {
	u64 := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"18446744073709551615", math.MaxUint64, true},
		{"18446744073709551616", 0, false}, {"-1", 0, false}, {"-0", 0, true},
		{"+7", 7, true}, {" 7", 7, true}, {"7\r", 7, true}, {"7\tx", 7, true},
		{"7x", 0, false}, {"", 0, false}, {"-", 0, false}, {"x", 0, false},
		{"-18446744073709551615", 1, true}, // C's strtoull negates modulo 2^64
	}
	for _, tt := range u64 {
		got, ok := safeStrtoull([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("safeStrtoull(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	i32 := []struct {
		in   string
		want int32
		ok   bool
	}{
		{"0", 0, true}, {"-1", -1, true}, {"2147483647", math.MaxInt32, true},
		{"2147483648", math.MinInt32, true}, {"-2147483649", math.MaxInt32, true},
		{"9223372036854775807", -1, true}, {"9223372036854775808", 0, false},
		{"-9223372036854775808", 0, true}, {"-9223372036854775809", 0, false},
		{"1.5", 0, false}, {"", 0, false},
	}
	for _, tt := range i32 {
		got, ok := safeStrtol([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("safeStrtol(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if v, ok := safeStrtoul([]byte("4294967297")); v != 1 || !ok {
		t.Errorf("safeStrtoul(2^32+1) = %d, %v", v, ok)
	}
	incr := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1", 1, true}, {"99 ", 99, true}, {" 12 ", 12, true}, {"", 0, false}, {"-12", 0, false},
		{"1a", 0, false}, {"7\x00ab", 7, true}, {"\x00", 0, false}, {"18446744073709551616", 0, false},
	}
	for _, tt := range incr {
		got, ok := parseIncrValue([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseIncrValue(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseCommand checks that no command line panics the parser and that
// what it accepts is within the protocol's limits.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"get a b c\r\n", "gets a\r\n", "gat 10 a b\r\n", "gats -1 a\r\n", "bget a\r\n",
		"set k 0 0 1\r\n", "set k 4294967296 -1 0 noreply\r\n", "add k 1 2 3\r\n",
		"replace k 1 2 3\r\n", "append k 0 0 1\r\n", "prepend k 0 0 1 noreply\r\n",
		"cas k 0 0 1 18446744073709551615\r\n", "incr k 18446744073709551615\r\n",
		"decr k 1 noreply\r\n", "touch k 2592001\r\n", "delete k 0 noreply\r\n",
		"flush_all 10 noreply\r\n", "flush_all\r\n", "stats settings\r\n", "stats detail on\r\n",
		"version\r\n", "verbosity 1 noreply\r\n", "quit\r\n", "shutdown graceful\r\n",
		"GET / HTTP/1.0\r\n", "\r\n", "\n", "", " ", "\x00", "set \xff 0 0 1\r\n",
		"set k 0 0 -1\r\n", "set k 0 0 2147483646\r\n", "get " + strings.Repeat("k ", 40) + "\r\n",
		"mg k v\r\n", "set k\t0 0 1\r\n", "set k 0 0 1\r\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c := parseCommand(line)
		if c.kind == cmdInvalid {
			if c.close {
				return
			}
			if c.reply == "" || strings.ContainsAny(c.reply, "\r\n") {
				t.Fatalf("bad reply %q", c.reply)
			}
			if c.swallow < 0 || c.swallow > maxVlen+2 {
				t.Fatalf("swallow %d", c.swallow)
			}
			return
		}
		if (c.reply != "" && !c.kind.isRetrieval()) || c.swallow != 0 || c.close {
			t.Fatalf("accepted command with a rejection: %+v", c)
		}
		for _, k := range c.keys {
			if k == "" || len(k) > maxKeyLen || !keyStorable([]byte(k)) || strings.ContainsAny(k, " \r\n\x00") {
				t.Fatalf("bad key %q accepted from %q", k, line)
			}
		}
		switch {
		case c.kind.isStorage():
			if len(c.keys) != 1 || c.vlen < 0 || c.vlen > maxVlen {
				t.Fatalf("bad storage command %+v", c)
			}
		case c.kind.isRetrieval():
		case c.kind == cmdIncr || c.kind == cmdDecr || c.kind == cmdTouch || c.kind == cmdDelete:
			if len(c.keys) != 1 {
				t.Fatalf("want one key: %+v", c)
			}
		default:
			if len(c.keys) != 0 {
				t.Fatalf("unexpected keys: %+v", c)
			}
		}
		if c.exptime < math.MinInt32 || c.exptime > math.MaxInt32 {
			t.Fatalf("exptime %d outside int32", c.exptime)
		}
	})
}

// A connection parses into room it keeps: the result is the same command as
// parseCommand's, the key list lands in the room (no list allocated per
// command), and reusing the room for the next command gives that command's
// keys.
func TestParseCommandIntoReusesRoom(t *testing.T) {
	room := make([]string, 0, 4)
	for _, line := range []string{"get a b c\r\n", "set k 1 2 3\r\n", "gets x\r\n", "delete d noreply\r\n", "incr i 5\r\n", "touch t 10\r\n", "get " + strings.Repeat("k ", 10) + "\r\n"} {
		got, want := parseCommandInto([]byte(line), room), parseCommand([]byte(line))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parseCommandInto(%q)\n got %+v\nwant %+v", line, got, want)
		}
		if len(got.keys) <= cap(room) && &got.keys[:1][0] != &room[:1][0] {
			t.Errorf("parseCommandInto(%q): key list not in the room given", line)
		}
	}
	line := []byte("get key:1\r\n")
	if n := testing.AllocsPerRun(100, func() { parseCommandInto(line, room) }); n > 1 {
		t.Errorf("parsing a get allocates %v times, want at most 1 (the key)", n)
	}
}
