//go:build oracle

package memcache

// The differential oracle: the same script of raw requests against Debian's
// real memcached and against Mayfly's server, responses compared byte for
// byte. Only what must differ is masked: cas unique values (their pattern is
// compared instead: the same as this key's last one, or new), the version
// string and stats values. Expiry needs the wall clock here, so this is the
// one place the tests sleep. Run: go test -tags oracle ./memcache/

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

const memcachedPath = "/usr/bin/memcached"

// startMemcached runs a real memcached on a free loopback port and returns
// its address; the test is skipped if memcached is not installed.
func startMemcached(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(memcachedPath); err != nil {
		t.Skipf("oracle: %s not installed (apt-get install -y memcached): %v", memcachedPath, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	// No LRU crawler and no LRU maintainer: like Mayfly without its pager,
	// memcached then finds expired items only when a command looks at them.
	// With them, background threads reap items stored already expired at
	// their own pace, and get_expired varies from run to run (seen: 5, 6, 11).
	// -X: no key dumps, as Mayfly's "stats settings" says (dump_enabled no).
	args := []string{"-p", port, "-l", "127.0.0.1", "-U", "0", "-X", "-o", "no_lru_crawler,no_lru_maintainer"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody") // memcached refuses to run as root
	}
	cmd := exec.Command(memcachedPath, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start memcached: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	for i := 0; ; i++ {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
			return addr
		}
		if i == 200 {
			t.Fatalf("memcached did not start on %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ostep is one request of the oracle script. In req, {now+N} and {now-N}
// become the wall-clock Unix time plus or minus N, and {cas:KEY} the cas
// unique of KEY's last gets/gats answer on that server.
type ostep struct {
	req    string
	sleep  time.Duration // before sending
	closes bool          // the server closes the connection: read to EOF, reconnect
	stats  bool          // a "stats" request: compare the listed counters only
	// differs names the DIFFERENCES.md entry this step shows: the answers
	// must differ (so the list stays true), and both are logged.
	differs string
}

// sentinel is sent after every request: its reply, the same from both
// servers and found nowhere else in the script, marks the end of the answer.
const (
	sentinelReq   = "stats detail\r\n"
	sentinelReply = "CLIENT_ERROR usage: stats detail on|off|dump\r\n"
)

// comparedStats are the counters whose values must agree after the script.
var comparedStats = []string{
	"cmd_get", "get_hits", "get_misses", "get_expired", "cmd_touch", "touch_hits", "touch_misses",
	"delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses",
	"cas_hits", "cas_misses", "cas_badval", "cmd_flush", "store_too_large", "curr_connections",
	"total_connections",
}

// presentStats are names both must report.
var presentStats = []string{
	"pid", "uptime", "time", "version", "curr_items", "total_items",
	"rejected_connections", "max_connections", "cmd_set", "expired_unfetched", "evictions",
	"bytes_read", "bytes_written", "limit_maxbytes", "threads",
}

var placeholderRE = regexp.MustCompile(`\{(now[+-]\d+|cas:[^}]+)\}`)

// oracleRun runs the script against addr and returns each step's answer,
// normalised. It runs in its own goroutine, so it reports errors instead of
// failing the test.
func oracleRun(addr string, script []ostep) ([]string, error) {
	clock := engine.SystemClock{}
	lastCAS := map[string]uint64{}
	var nc net.Conn
	var r *bufio.Reader
	dial := func() error {
		var err error
		if nc, err = net.Dial("tcp", addr); err != nil {
			return err
		}
		r = bufio.NewReaderSize(nc, 1<<16)
		return nil
	}
	if err := dial(); err != nil {
		return nil, err
	}
	defer func() { nc.Close() }()
	out := make([]string, len(script))
	for i, st := range script {
		if st.sleep > 0 {
			time.Sleep(st.sleep)
		}
		req := placeholderRE.ReplaceAllStringFunc(st.req, func(p string) string {
			p = p[1 : len(p)-1]
			if k, ok := strings.CutPrefix(p, "cas:"); ok {
				return strconv.FormatUint(lastCAS[k], 10)
			}
			n, _ := strconv.ParseInt(p[4:], 10, 64)
			if p[3] == '-' {
				n = -n
			}
			return strconv.FormatInt(clock.Now()+n, 10)
		})
		var resp []byte
		closed := st.closes
		err := withDeadline(nc, func() error {
			if st.closes {
				if _, err := io.WriteString(nc, req); err != nil {
					return err
				}
				b, err := io.ReadAll(r)
				if errors.Is(err, syscall.ECONNRESET) {
					err = nil
				}
				resp = append(b, "<closed>"...)
				return err
			}
			if _, err := io.WriteString(nc, req+sentinelReq); err != nil {
				return err
			}
			for !bytes.HasSuffix(resp, []byte(sentinelReply)) {
				b, err := r.ReadBytes('\n')
				resp = append(resp, b...)
				if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
					resp = append(resp, "<closed>"...)
					closed = true
					return nil
				}
				if err != nil {
					return err
				}
			}
			resp = resp[:len(resp)-len(sentinelReply)]
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: step %d %q: %w (got %q)", addr, i, abbrev(req), err, abbrev(string(resp)))
		}
		if closed {
			nc.Close()
			if err := dial(); err != nil {
				return nil, err
			}
		}
		if st.stats {
			out[i] = normaliseStats(resp)
		} else {
			out[i] = normalise(resp, lastCAS)
		}
	}
	return out, nil
}

// withDeadline runs fn with the connection's reads bounded by 30 s.
func withDeadline(nc net.Conn, fn func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return fn()
}

// normalise masks the cas uniques (as "same" or "new" for their key) and
// the version.
func normalise(resp []byte, lastCAS map[string]uint64) string {
	var b strings.Builder
	for len(resp) > 0 {
		i := bytes.Index(resp, []byte("\r\n"))
		if i < 0 {
			b.Write(resp)
			break
		}
		line := string(resp[:i])
		resp = resp[i+2:]
		f := strings.Split(line, " ")
		switch {
		case f[0] == "VALUE" && (len(f) == 4 || len(f) == 5):
			n, _ := strconv.Atoi(f[3])
			if len(f) == 5 {
				cas, _ := strconv.ParseUint(f[4], 10, 64)
				label := "new"
				if old, ok := lastCAS[f[1]]; ok && old == cas {
					label = "same"
				}
				lastCAS[f[1]] = cas
				f[4] = "<cas:" + label + ">"
			}
			b.WriteString(strings.Join(f, " ") + "\r\n")
			n = min(n+2, len(resp))
			b.Write(resp[:n])
			resp = resp[n:]
		case strings.HasPrefix(line, "VERSION "):
			b.WriteString("VERSION <masked>\r\n")
		default:
			b.WriteString(line + "\r\n")
		}
	}
	return b.String()
}

// normaliseStats keeps the compared counters with their values and the
// required names without theirs.
func normaliseStats(resp []byte) string {
	m := map[string]string{}
	for _, l := range strings.Split(string(resp), "\r\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "STAT" {
			m[f[1]] = f[2]
		}
	}
	var b strings.Builder
	for _, k := range comparedStats {
		fmt.Fprintf(&b, "%s=%s\n", k, m[k])
	}
	for _, k := range presentStats {
		_, ok := m[k]
		fmt.Fprintf(&b, "%s present=%v\n", k, ok)
	}
	return b.String()
}

func abbrev(s string) string {
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

// oracleScript is the shared script. It avoids what DIFFERENCES.md lists.
func oracleScript() []ostep {
	s := func(reqs ...string) []ostep {
		out := make([]ostep, len(reqs))
		for i, r := range reqs {
			out[i] = ostep{req: r}
		}
		return out
	}
	long := strings.Repeat("k", 251)
	ok250 := strings.Repeat("k", 250)
	maxPlain := 1<<20 - itemHeaderLen - 1 - 1 - 2 // key "b", flags 0
	var script []ostep
	add := func(st ...ostep) { script = append(script, st...) }

	add(s("stats reset\r\n", "version\r\n", "verbosity 1\r\n", "verbosity 0 noreply\r\n")...)
	// Storage and retrieval.
	add(s(
		"set k 5 0 3\r\nabc\r\n", "get k\r\n", "gets k\r\n",
		"set k 0 0 0\r\n\r\n", "get k\r\n",
		"set bin 0 0 6\r\n\x00\xff\r\n\r\n\r\n", "get bin\r\n",
		"set json 0 0 7\r\n{\"a\":1}\r\n", "get json bin k\r\n",
		"set fl 4294967295 0 1\r\nx\r\n", "get fl\r\n",
		"set fl 4294967296 0 1\r\nx\r\n", "get fl\r\n",
		"add a 0 0 1\r\na\r\n", "add a 0 0 1\r\nb\r\n", "get a\r\n",
		"replace r 0 0 1\r\na\r\n", "set r 0 0 1\r\na\r\n", "replace r 7 0 1\r\nb\r\n", "get r\r\n",
		"append ap 0 0 1\r\na\r\n", "prepend ap 0 0 1\r\na\r\n",
		"set ap 9 0 2\r\nbb\r\n", "append ap 1 0 2\r\ncc\r\n", "prepend ap 2 0 2\r\naa\r\n", "get ap\r\n",
		"get a nothing r a ap\r\n", "gets a r\r\n", "bget a\r\n",
		"get "+keyList(40)+"a\r\n",
		"set "+ok250+" 0 0 1\r\nz\r\n", "get "+ok250+"\r\n",
		"set  sp  0  0  1 \r\nx\r\n", "   get sp\r\n",
		"set lf 0 0 1\nx\r\n", "get lf\n",
		"set v 0 0 4294967297\r\nz\r\n", "get v\r\n",
		"set neg 0 0 +1\r\ny\r\n", "get neg\r\n",
	)...)
	// delete.
	add(s(
		"delete d\r\n", "set d 0 0 1\r\na\r\n", "delete d\r\n", "get d\r\n",
		"set d 0 0 1\r\na\r\n", "delete d 0\r\n", "delete d 1\r\n", "delete d x noreply\r\n",
		"set d 0 0 1\r\na\r\n", "delete d noreply\r\n", "delete d 0 noreply\r\n", "get d\r\n",
	)...)
	// cas.
	add(s(
		"cas c 0 0 1 1\r\na\r\n", "set c 3 0 1\r\na\r\n", "gets c\r\n",
		"cas c 4 0 1 1\r\nb\r\n", "cas c 4 0 1 0\r\nb\r\n",
		"cas c 4 0 1 {cas:c}\r\nb\r\n", "gets c\r\n", "get c\r\n",
		"append c 0 0 1\r\nx\r\n", "gets c\r\n", "gets c\r\n",
		"cas c 4 0 1 {cas:c} noreply\r\ny\r\n", "gets c\r\n",
		"delete c\r\n", "cas c 4 0 1 {cas:c}\r\nz\r\n", "cas c 0 0 1 0\r\nb\r\n",
	)...)
	// incr and decr.
	add(s(
		"incr n 1\r\n", "decr n 1\r\n", "set n 5 0 2\r\n10\r\n",
		"incr n 18446744073709551615\r\n", "get n\r\n", "incr n 1\r\n", "incr n +2\r\n",
		"decr n 100\r\n", "get n\r\n", "set n 0 0 3\r\n100\r\n", "decr n 1\r\n", "get n\r\n",
		"incr n 1\r\n", "incr n 900\r\n", "gets n\r\n",
		"set n 0 0 20\r\n18446744073709551615\r\n", "incr n 2\r\n", "get n\r\n",
		"set n 0 0 4\r\n 12 \r\n", "incr n 1\r\n", "get n\r\n",
		"set n 0 0 22\r\n0000000000000000000001\r\n", "incr n 1\r\n", "get n\r\n",
		"set n 0 0 3\r\n-12\r\n", "incr n 1\r\n", "set n 0 0 3\r\n1a2\r\n", "incr n 1\r\n",
		"set n 0 0 0\r\n\r\n", "decr n 1\r\n", "set n 0 0 20\r\n18446744073709551616\r\n", "incr n 1\r\n",
		"set n 0 0 5\r\nabcde\r\n", "decr n 1\r\n", "set n 0 0 4\r\n7\x00ab\r\n", "incr n 1\r\n",
		"set n 7 0 1\r\n5\r\n", "incr n 3 noreply\r\n", "decr n 1 noreply\r\n", "get n\r\n",
		"incr json 1\r\n", "incr bin 1\r\n",
	)...)
	// noreply.
	add(s(
		"set q 1 0 1 noreply\r\na\r\n", "add q 0 0 1 noreply\r\nb\r\n", "replace q 2 0 1 noreply\r\nc\r\n",
		"append q 0 0 1 noreply\r\nd\r\n", "prepend q 0 0 1 noreply\r\ne\r\n", "get q\r\n",
		"cas q 0 0 1 1 noreply\r\nz\r\n", "touch q 100 noreply\r\n", "touch nothing 1 noreply\r\n",
		"incr q x noreply\r\n", "touch q x noreply\r\n", "set q x 0 1 noreply\r\nz\r\n",
		"set q 0 0 1 noreply\r\nabc\r\n", "get q\r\n",
	)...)
	// Bad command lines.
	add(s(
		"\r\n", "x\r\n", "bogus a b\r\n", "GET k\r\n", "get\r\n", "get \r\n", "set k 0 0\r\n",
		"set k 0 0 1 2 3\r\n", "cas k 0 0 1\r\n", "incr k\r\n", "touch k\r\n", "delete\r\n",
		"delete a b c d\r\n", "verbosity\r\n", "flush_all 1 2 3\r\n", "stats bogus\r\n",
		"shutdown\r\n", "gat 10\r\n", "gets\r\n",
		"stats cachedump 1 0\r\n", "stats cachedump\r\n",
		"cache_memlimit\r\n", "cache_memlimit 1 2 3\r\n", "cache_memlimit abc\r\n", "cache_memlimit abc noreply\r\n",
		"cache_memlimit 64 noreply\r\n",
		"set k x 0 1\r\nz\r\n", "set k 0 x 1\r\nz\r\n", "set k 0 0 x\r\nz\r\n", "set k 0 0 -1\r\n",
		"set k -1 0 1\r\nz\r\n", "set k 18446744073709551616 0 1\r\nz\r\n", "set k 0 0 2147483647\r\n",
		"cas k 0 0 1 x\r\nz\r\n", "cas k 0 0 1 -1\r\nz\r\n",
		"set "+long+" 0 0 1\r\nz\r\n", "get a "+long+" "+ok250+"\r\n", "delete "+long+"\r\n",
		"incr "+long+" 1\r\n", "touch "+long+" 1\r\n",
		"incr k x\r\n", "incr k -1\r\n", "incr k 18446744073709551616\r\n", "touch k x\r\n",
		"gat x k\r\n", "flush_all x\r\n", "flush_all noreply 5\r\n", "verbosity x\r\n",
		"set k 0 0 3\r\nabcde\r\n", "set k 0 0 1\nx\nget k\n", "set k 0 0 1\r\nx\rget k\r\n",
	)...)
	// Meta set lines memcached refuses before their block, and blocks it
	// cannot take: the same answers, the block never run as a command.
	add(s(
		"ms k\r\n", "ms k abc\r\n", "ms k -1\r\n", "ms k 2147483647\r\n",
		"ms "+long+" 2\r\nab\r\n", "ms k 2"+strings.Repeat(" T1", 17)+"\r\nab\r\n",
		"ms k 3\r\nabcde\r\n",
		fmt.Sprintf("ms b %d\r\n%s\r\n", maxPlain+1, strings.Repeat("v", maxPlain+1)),
	)...)
	// Too large: memcached's exact limit, and the data swallowed.
	add(s(
		fmt.Sprintf("set b 0 0 %d\r\n%s\r\n", maxPlain, strings.Repeat("v", maxPlain)),
		fmt.Sprintf("set b 0 0 %d\r\n%s\r\n", maxPlain+1, strings.Repeat("v", maxPlain+1)),
		"get b\r\n",
		fmt.Sprintf("set b 1 0 %d\r\n%s\r\n", maxPlain-4, strings.Repeat("v", maxPlain-4)),
		fmt.Sprintf("set b 1 0 %d\r\n%s\r\n", maxPlain-3, strings.Repeat("v", maxPlain-3)),
		fmt.Sprintf("set b 1 0 %d\r\n%s\r\n", maxPlain-4, strings.Repeat("v", maxPlain-4)),
		"append b 0 0 1\r\nx\r\n",
		fmt.Sprintf("set b 0 0 %d noreply\r\n%s\r\n", 3<<20, strings.Repeat("w", 3<<20)),
		"get b\r\n",
	)...)
	// flush_all now.
	add(s("set f 0 0 1\r\nv\r\n", "flush_all\r\n", "get f\r\n", "set f 0 0 1\r\nv\r\n",
		"flush_all 0 noreply\r\n", "get f\r\n", "set f 0 0 1\r\nv\r\n", "flush_all 1\r\n", "get f\r\n",
		"set f 0 0 1\r\nv\r\n", "flush_all -3\r\n", "get f\r\n")...)

	// Expiry, phase 1: set everything, look at once, sleep, look again. The
	// shortest lifetime is 3 s: whole-second clocks (memcached's also lags by
	// up to a second) make a relative N live between N-1 and N seconds, and the
	// look "at once" must be safely inside that even on a loaded machine.
	now := s(
		"set e0 0 0 1\r\nv\r\n",
		"set e2 0 3 1\r\nv\r\n",
		"set absf 0 {now+4} 1\r\nv\r\n",
		"set absfar 0 {now+1000} 1\r\nv\r\n",
		"set absp 0 {now-10} 1\r\nv\r\n",
		"set neg 0 -1 1\r\nv\r\n",
		"set big 0 2147483648 1\r\nv\r\n",
		"set huge 0 -2147483649 1\r\nv\r\n",
		"set m30 0 2592000 1\r\nv\r\n",
		"set m30p 0 2592001 1\r\nv\r\n",
		"set t1 0 100 1\r\nv\r\n", "touch t1 3\r\n",
		"set t2 0 3 1\r\nv\r\n", "touch t2 100\r\n",
		"set t3 0 3 1\r\nv\r\n", "touch t3 0\r\n",
		"set t4 0 100 1\r\nv\r\n", "touch t4 -1\r\n",
		"set g1 0 100 1\r\nv\r\n", "gat 3 g1\r\n",
		"set g2 3 3 1\r\nv\r\n", "gats 100 g2 nothing\r\n",
		"set g3 0 100 1\r\nv\r\n", "gat -1 g3\r\n", "get g3\r\n",
		"touch nothing 10\r\n", "gat 10 nothing\r\n",
		"set ex 0 3 1\r\n7\r\n",
		"get e0 e2 absf absfar absp neg big huge m30 m30p t1 t2 t3 t4 g1 g2 ex\r\n",
	)
	add(now...)
	add(ostep{req: "get e0 e2 absf absfar absp neg big huge m30 m30p t1 t2 t3 t4 g1 g2\r\n", sleep: 5500 * time.Millisecond})
	add(s("incr ex 1\r\n", "add ex 0 0 1\r\n8\r\n", "get ex\r\n", "replace e2 0 0 1\r\nx\r\n",
		"append e2 0 0 1\r\nx\r\n", "touch e2 10\r\n", "delete e2\r\n")...)
	// Expiry, phase 2: a delayed flush_all (4: effective 3 s later on both).
	add(s("set fa 0 0 1\r\nv\r\n", "flush_all 4\r\n", "get fa\r\n", "set fb 0 0 1\r\nv\r\n", "get fa fb\r\n")...)
	add(ostep{req: "get fa fb e0\r\n", sleep: 5500 * time.Millisecond})
	add(s("set fc 0 0 1\r\nv\r\n", "get fc\r\n")...)
	// Counters.
	add(ostep{req: "stats\r\n", stats: true})
	// The documented differences, shown.
	add(s("set td 0 0 1\r\nv\r\n", "gets td\r\n")...)
	add(ostep{req: "touch td 100\r\ngets td\r\n", differs: "touch and gat change the CAS"},
		ostep{req: "gats 100 td\r\n", differs: "touch and gat change the CAS"},
		ostep{req: "set a\tb 0 0 1\r\nz\r\n", differs: "keys Mayfly cannot store"},
		ostep{req: "set \xff\xfe 0 0 1\r\nz\r\n", differs: "keys Mayfly cannot store"},
		ostep{req: "get a\x01b\r\n", differs: "keys Mayfly cannot store"},
		ostep{req: "mn\r\n", differs: "meta commands"},
		ostep{req: "mg td v\r\n", differs: "meta commands"},
		ostep{req: "ms td 9\r\ndelete td\r\n", differs: "meta commands"},
		ostep{req: "stats detail on\r\n"},
		ostep{req: "stats detail off\r\n"},
		ostep{req: "cache_memlimit 100\r\n", differs: "admin commands"},
		ostep{req: "flush_all 2592001\r\nget fc\r\n", differs: "flush_all at an absolute time before memcached started"},
		ostep{req: "set " + strings.Repeat("k", 3000) + " 0 0 1\r\nv\r\n", differs: "long lines"},
	)
	// Connection-closing requests last.
	add(
		ostep{req: "quit\r\n", closes: true},
		ostep{req: "set k 0 0 1\r\nv\r\nquit\r\nget k\r\n", closes: true},
		ostep{req: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", closes: true},
		ostep{req: strings.Repeat("a", 3000), closes: true},
		ostep{req: "get k\r\n"},
	)
	return script
}

func TestOracle(t *testing.T) {
	mcAddr := startMemcached(t)
	f := newFixtureClock(t, nil, engine.SystemClock{}, nil)
	script := oracleScript()
	var got [2][]string
	var errs [2]error
	var wg sync.WaitGroup
	for i, addr := range []string{mcAddr, f.addr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = oracleRun(addr, script)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	diffs := 0
	for i, st := range script {
		if st.differs != "" {
			if got[0][i] == got[1][i] {
				t.Errorf("step %d %q: documented difference %q does not show: both %q", i, abbrev(st.req), st.differs, abbrev(got[0][i]))
			}
			t.Logf("documented difference %q: %q\n memcached: %q\n mayfly:    %q", st.differs, abbrev(st.req), abbrev(got[0][i]), abbrev(got[1][i]))
			continue
		}
		if got[0][i] != got[1][i] {
			diffs++
			t.Errorf("step %d %q:\n memcached: %q\n mayfly:    %q", i, abbrev(st.req), abbrevN(got[0][i], st.stats), abbrevN(got[1][i], st.stats))
		}
	}
	t.Logf("oracle: %d steps, %d differences", len(script), diffs)
}

// BenchmarkMemcachedGetSet runs BenchmarkServerGetSet's load against a real
// memcached, so both figures come from one run:
//
//	go test -tags oracle -run XXX -bench GetSet ./memcache/
func BenchmarkMemcachedGetSet(b *testing.B) {
	benchGetSet(b, startMemcached(b))
}

// BenchmarkMemcachedMix runs BenchmarkServerMix's loads against a real
// memcached, so the figures come from one run.
func BenchmarkMemcachedMix(b *testing.B) {
	for _, mix := range benchMixes {
		b.Run(mix.name, func(b *testing.B) {
			benchMix(b, startMemcached(b), mix.setEvery)
		})
	}
}

// abbrevN abbreviates unless full is set.
func abbrevN(s string, full bool) string {
	if full {
		return s
	}
	return abbrev(s)
}
