package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/logtest"
)

// streamConn is a connection whose client sends a fixed byte stream, then
// leaves; what the server writes is counted and dropped.
type streamConn struct {
	r       *bytes.Reader
	written atomic.Int64
}

func (c *streamConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *streamConn) Write(p []byte) (int, error) {
	c.written.Add(int64(len(p)))
	return len(p), nil
}
func (c *streamConn) Close() error { return nil }
func (c *streamConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 11210}
}
func (c *streamConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzMaxBody is the connection fuzzer's packet body limit.
const fuzzMaxBody = 4 << 10

// sessionSeed is a whole session as a client would send it: HELLO,
// login, bucket, then each of pkts (with collection IDs, as HELLO
// negotiated them).
func sessionSeed(t testing.TB, pkts ...*memd.Packet) []byte {
	var buf bytes.Buffer
	mc := memd.NewConn(&buf)
	write := func(p *memd.Packet) {
		p.Magic = memd.CmdMagicReq
		if err := mc.WritePacket(p); err != nil {
			t.Fatal(err)
		}
	}
	var feats []byte
	for _, f := range []memd.HelloFeature{memd.FeatureXerror, memd.FeatureJSON, memd.FeatureCollections, memd.FeatureAltRequests, memd.FeatureSeqNo, memd.FeatureXattr} {
		feats = binary.BigEndian.AppendUint16(feats, uint16(f))
	}
	write(&memd.Packet{Command: memd.CmdHello, Key: []byte("fuzz"), Value: feats})
	mc.EnableFeature(memd.FeatureCollections)
	mc.EnableFeature(memd.FeatureAltRequests)
	write(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00admin\x00admin-pass")})
	write(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("b")})
	for _, p := range pkts {
		write(p)
	}
	return buf.Bytes()
}

// subdocPath is a single-path request's extras and value.
func subdocPath(path, value string) ([]byte, []byte) {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(path))), 0), []byte(path + value)
}

// FuzzConn feeds a byte stream of packets to a whole connection, logged
// in, on an in-memory bucket: whatever the client sends, the server must
// not panic (serveConn and run recover a panic, and log it: the log must
// have none) and must allocate within a bound of what it was sent
// (nothing a header announces is allocated before it has arrived).
func FuzzConn(f *testing.F) {
	ctx := context.Background()
	dir := f.TempDir()
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 4, NoSync: true, Clock: engine.NewFakeClock(1_700_000_000)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Ephemeral}); err != nil {
		f.Fatal(err)
	}
	users, err := auth.Open(dir, &auth.Options{AdminUser: "admin", AdminPassword: "admin-pass",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		f.Fatal(err)
	}

	set := func(key, value string) *memd.Packet {
		return &memd.Packet{Command: memd.CmdSet, Key: []byte(key), Value: []byte(value), Extras: make([]byte, 8)}
	}
	ext, val := subdocPath("a.b", `[1]`)
	iext, ival := subdocPath("a.b[0]", `0`)
	f.Add(sessionSeed(f,
		set("k", `{"a":{"b":[1,2]}}`),
		&memd.Packet{Command: memd.CmdGet, Key: []byte("k")},
		&memd.Packet{Command: memd.CmdSubDocDictSet, Key: []byte("k"), Extras: append(ext[:2:2], byte(memd.SubdocFlagMkDirP)), Value: val},
		&memd.Packet{Command: memd.CmdSubDocArrayInsert, Key: []byte("k"), Extras: iext, Value: ival},
		&memd.Packet{Command: memd.CmdSubDocMultiLookup, Key: []byte("k"), Value: []byte{byte(memd.SubDocOpGet), 0, 0, 3, 'a', '.', 'b'}},
		&memd.Packet{Command: memd.CmdIncrement, Key: []byte("n"), Extras: make([]byte, 20)},
		&memd.Packet{Command: memd.CmdStat},
		&memd.Packet{Command: memd.CmdStat, Key: []byte("memory")},
		&memd.Packet{Command: memd.CmdGetClusterConfig},
		&memd.Packet{Command: memd.CmdCollectionsGetManifest},
		&memd.Packet{Command: memd.CmdDcpOpenConnection, Key: []byte("dcp"), Extras: make([]byte, 8)},
		&memd.Packet{Command: memd.CmdGetLocked, Key: []byte("k"), Extras: make([]byte, 4)},
		&memd.Packet{Command: memd.CmdUnlockKey, Key: []byte("k"), Cas: 1},
		&memd.Packet{Command: memd.CmdDelete, Key: []byte("k")},
	))
	f.Add(sessionSeed(f, &memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("SCRAM-SHA256"), Value: []byte("n,,n=admin,r=abc")},
		&memd.Packet{Command: memd.CmdSASLStep, Key: []byte("SCRAM-SHA256"), Value: []byte("c=biws,r=abc,p=AAAA")}))
	f.Add([]byte{0x80, 0x01, 0, 1, 8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}) // 4 GiB announced

	f.Fuzz(func(t *testing.T, data []byte) {
		var logs logtest.Buffer
		s, err := New(eng, &Options{Auth: users, MaxBodyLen: fuzzMaxBody, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		nc := &streamConn{r: bytes.NewReader(data)}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.serveConn(ctx, nc)
		runtime.ReadMemStats(&after)
		if strings.Contains(logs.String(), "panic") {
			t.Fatalf("the connection panicked: %s", logs.String())
		}
		// Per byte received, at most a password hash's memory (argon2 at
		// 64 KiB for a PLAIN login of a few dozen bytes) and the
		// answers; plus the connection's own buffers.
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(16<<20)+4096*uint64(len(data)); got > limit {
			t.Fatalf("%d bytes sent made %d bytes allocated, over %d", len(data), got, limit)
		}
	})
}
