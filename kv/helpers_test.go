package kv_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
)

const (
	bucketName = "b"
	adminUser  = "Administrator"
	adminPass  = "admin-pass"
	readerUser = "reader"
	readerPass = "reader-pass"
)

// fixture is an engine with a fake clock and one bucket, served on a
// loopback KV port.
type fixture struct {
	addr   string
	srv    *kv.Server
	clock  *engine.FakeClock
	eng    *engine.Engine
	bucket *engine.Bucket

	mu      sync.Mutex
	audited []audit.Event
}

func newFixture(t *testing.T, tune ...func(*kv.Options)) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f := &fixture{clock: engine.NewFakeClock(1_700_000_000)}
	eng, err := engine.Open(dir, &engine.Options{Clock: f.clock, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f.eng = eng
	if f.bucket, err = eng.CreateBucket(ctx, engine.DefaultBucketSettings(bucketName)); err != nil {
		t.Fatal(err)
	}
	users, err := auth.Open(dir, &auth.Options{AdminUser: adminUser, AdminPassword: adminPass,
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	roles, err := auth.ParseRoles("data_reader[" + bucketName + "]")
	if err != nil {
		t.Fatal(err)
	}
	if err := users.PutUser(readerUser, "", readerPass, roles); err != nil {
		t.Fatal(err)
	}
	opts := &kv.Options{
		Auth: users, Ports: clusterconfig.Ports{Mgmt: 8091, Capi: 8091},
		Audit: func(_ context.Context, e audit.Event) error {
			f.mu.Lock()
			f.audited = append(f.audited, e)
			f.mu.Unlock()
			return nil
		},
	}
	for _, fn := range tune {
		fn(opts)
	}
	srv, err := kv.New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr, f.srv = ln.Addr().String(), srv
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, kv.ErrServerClosed) {
			t.Errorf("Serve: %v, want ErrServerClosed", err)
		}
		eng.Close()
	})
	return f
}

// client is a test client speaking memd packets over TCP.
type client struct {
	t      *testing.T
	nc     net.Conn
	mc     *memd.Conn
	opaque uint32
}

func (f *fixture) dial(t *testing.T) *client {
	t.Helper()
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	// Long enough for a loaded machine; only a hang trips it.
	nc.SetDeadline(time.Now().Add(time.Minute))
	return &client{t: t, nc: nc, mc: memd.NewConn(nc)}
}

// send writes a request without waiting.
func (c *client) send(p *memd.Packet) uint32 {
	c.t.Helper()
	c.opaque++
	p.Magic = memd.CmdMagicReq
	p.Opaque = c.opaque
	if err := c.mc.WritePacket(p); err != nil {
		c.t.Fatal(err)
	}
	return p.Opaque
}

// read reads the next answer.
func (c *client) read() *memd.Packet {
	c.t.Helper()
	p, _, err := c.mc.ReadPacket()
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// do sends a request and reads its answer.
func (c *client) do(p *memd.Packet) *memd.Packet {
	c.t.Helper()
	op := c.send(p)
	r := c.read()
	if r.Opaque != op || r.Command != p.Command {
		c.t.Fatalf("answer to %v opaque %d: got %v opaque %d", p.Command, op, r.Command, r.Opaque)
	}
	return r
}

// expect sends p and checks the answer's status.
func (c *client) expect(p *memd.Packet, want memd.StatusCode) *memd.Packet {
	c.t.Helper()
	r := c.do(p)
	if r.Status != want {
		c.t.Fatalf("%v %q: status %v (%s), want %v", p.Command, p.Key, r.Status, r.Value, want)
	}
	return r
}

// hello negotiates features and returns those the server took.
func (c *client) hello(fs ...memd.HelloFeature) []memd.HelloFeature {
	c.t.Helper()
	var v []byte
	for _, f := range fs {
		v = binary.BigEndian.AppendUint16(v, uint16(f))
	}
	r := c.expect(&memd.Packet{Command: memd.CmdHello, Key: []byte("test"), Value: v}, memd.StatusSuccess)
	var out []memd.HelloFeature
	for i := 0; i+1 < len(r.Value); i += 2 {
		f := memd.HelloFeature(binary.BigEndian.Uint16(r.Value[i:]))
		out = append(out, f)
		if f == memd.FeatureCollections {
			c.mc.EnableFeature(f)
		}
	}
	return out
}

// login authenticates with SASL PLAIN and selects the bucket.
func (c *client) login(user, pass string) {
	c.t.Helper()
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + user + "\x00" + pass)}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
}

// set stores value under key with flags and expiry, and returns the CAS.
func (c *client) set(cmd memd.CmdCode, key, value string, flags, expiry uint32, cas uint64, want memd.StatusCode) uint64 {
	c.t.Helper()
	ext := binary.BigEndian.AppendUint32(nil, flags)
	ext = binary.BigEndian.AppendUint32(ext, expiry)
	return c.expect(&memd.Packet{Command: cmd, Key: []byte(key), Value: []byte(value), Extras: ext, Cas: cas}, want).Cas
}

// expectClosed checks the server closes the connection.
func (c *client) expectClosed() {
	c.t.Helper()
	var b [1]byte
	if _, err := c.nc.Read(b[:]); !errors.Is(err, io.EOF) {
		c.t.Fatalf("read after a refused packet: %v, want EOF", err)
	}
}

// jsonOf decodes an answer's JSON value.
func jsonOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func strconvI(n int64) string { return strconv.FormatInt(n, 10) }

func hex16(n uint64) string { return fmt.Sprintf("%016x", n) }

// serveEngine serves eng (whose buckets a test made) on a loopback KV port
// with the admin user, until the test ends; close runs first at the end (a
// hook's gate to open, say).
func serveEngine(t *testing.T, eng *engine.Engine, close func()) *fixture {
	t.Helper()
	ctx := context.Background()
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass,
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kv.New(eng, &kv.Options{Auth: users, Ports: clusterconfig.Ports{Mgmt: 8091, Capi: 8091}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		close()
		srv.Close()
		if err := <-done; !errors.Is(err, kv.ErrServerClosed) {
			t.Errorf("Serve: %v, want ErrServerClosed", err)
		}
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	})
	return &fixture{addr: ln.Addr().String(), srv: srv, eng: eng}
}
