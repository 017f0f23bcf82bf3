package sdktest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
)

// server is a Mayfly engine with its views, expiry pager, HTTP API and KV
// port, in this process.
type server struct {
	addr  string // the KV port
	clock *engine.FakeClock
	eng   *engine.Engine
	pager *pager.Manager
	users *auth.Store
}

const (
	bucketName = "travel"
	user       = "app"
	password   = "app-secret"

	adminUser     = "Administrator"
	adminPassword = "admin-secret"
)

// start opens an engine with a fake clock, a bucket, a user with
// data_reader and data_writer on it, and serves the KV port on a free
// loopback port.
func start(t testing.TB) *server {
	return startWith(t, true)
}

// startWith is start, with or without an fsync per group commit.
func startWith(t testing.TB, noSync bool) *server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	clock := engine.NewFakeClock(time.Now().Unix())
	eng, err := engine.Open(dir, &engine.Options{Clock: clock, NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(bucketName)); err != nil {
		t.Fatal(err)
	}
	users, err := auth.Open(dir, &auth.Options{AdminUser: adminUser, AdminPassword: adminPassword,
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	roles, err := auth.ParseRoles("data_reader[" + bucketName + "],data_writer[" + bucketName + "]")
	if err != nil {
		t.Fatal(err)
	}
	if err := users.PutUser(user, "", password, roles); err != nil {
		t.Fatal(err)
	}
	vsvc, err := views.New(ctx, eng, &views.Options{NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vsvc.Close() })
	pm := pager.New(eng, nil)
	t.Cleanup(func() { pm.Close(context.Background()) })

	ssvc, err := search.New(ctx, eng, &search.Options{NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ssvc.Close() })

	// The KV port, and the HTTP API on the management port and on the views
	// and search ports (their paths only), as the configuration lists them.
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	ln, mgmtLn, capiLn, ftsLn := listen(), listen(), listen(), listen()
	port := func(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }
	ports := clusterconfig.Ports{KV: port(ln), Mgmt: port(mgmtLn), Capi: port(capiLn), FTS: port(ftsLn)}
	api := httpapi.New(eng, &httpapi.Options{Auth: users, Views: vsvc, Pager: pm, Search: ssvc, ClusterPorts: ports})
	for hl, h := range map[net.Listener]http.Handler{mgmtLn: api, capiLn: httpapi.Only(api, httpapi.ViewsPort), ftsLn: httpapi.Only(api, httpapi.SearchPort)} {
		hs := &http.Server{Handler: h}
		go hs.Serve(hl)
		t.Cleanup(func() { hs.Close() })
	}

	srv, err := kv.New(eng, &kv.Options{Auth: users, Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, ln)
	t.Cleanup(func() { srv.Close() })
	return &server{addr: ln.Addr().String(), clock: clock, eng: eng, pager: pm, users: users}
}

// connect opens the bucket through gocb as name/pass, with gocb's default
// settings (SCRAM-SHA512 without TLS) and, if given, the SASL mechanisms
// allowed.
func (s *server) connect(t testing.TB, name, pass string, mechs ...gocb.SaslMechanism) (*gocb.Cluster, *gocb.Collection) {
	t.Helper()
	cl, err := gocb.Connect("couchbase://"+s.addr, gocb.ClusterOptions{
		Username: name, Password: pass,
		SecurityConfig: gocb.SecurityConfig{AllowedSaslMechanisms: mechs},
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: 30 * time.Second, KVTimeout: kvTimeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(nil) })
	b := cl.Bucket(bucketName)
	return cl, b.DefaultCollection()
}

func mustRoles(t testing.TB, s string) []auth.Role {
	t.Helper()
	r, err := auth.ParseRoles(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type hotel struct {
	Name  string `json:"name"`
	Stars int    `json:"stars"`
}

func TestKeyValue(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)

	// Upsert with an expiry; get with expiry.
	res, err := coll.Upsert("h1", hotel{"Ritz", 5}, &gocb.UpsertOptions{Expiry: time.Hour})
	if err != nil {
		t.Fatalf("upsert: %v", err)
	}
	if res.Cas() == 0 {
		t.Fatal("upsert: CAS 0")
	}
	got, err := coll.Get("h1", &gocb.GetOptions{WithExpiry: true})
	if err != nil {
		t.Fatalf("get with expiry: %v", err)
	}
	var h hotel
	if err := got.Content(&h); err != nil || h != (hotel{"Ritz", 5}) {
		t.Fatalf("get: %+v, %v", h, err)
	}
	want := time.Unix(s.clock.Now()+3600, 0)
	if e := got.ExpiryTime(); !e.Equal(want) {
		t.Fatalf("expiry %v, want %v", e, want)
	}
	if got.Cas() != res.Cas() {
		t.Fatalf("get CAS %d, upsert CAS %d", got.Cas(), res.Cas())
	}

	// Touch, then get-and-touch, move the expiry.
	if _, err := coll.Touch("h1", 2*time.Hour, nil); err != nil {
		t.Fatalf("touch: %v", err)
	}
	got, err = coll.Get("h1", &gocb.GetOptions{WithExpiry: true})
	if err != nil || !got.ExpiryTime().Equal(time.Unix(s.clock.Now()+7200, 0)) {
		t.Fatalf("after touch: expiry %v, %v", got.ExpiryTime(), err)
	}
	gat, err := coll.GetAndTouch("h1", 10*time.Second, nil)
	if err != nil {
		t.Fatalf("get and touch: %v", err)
	}
	if err := gat.Content(&h); err != nil || h.Name != "Ritz" {
		t.Fatalf("get and touch: %+v, %v", h, err)
	}

	// The document expires when the clock passes its expiry.
	s.clock.Advance(11)
	if _, err := coll.Get("h1", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("get after expiry: %v, want ErrDocumentNotFound", err)
	}

	// Insert over an existing key.
	if _, err := coll.Insert("h2", hotel{"Savoy", 4}, nil); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if _, err := coll.Insert("h2", hotel{"Savoy", 5}, nil); !errors.Is(err, gocb.ErrDocumentExists) {
		t.Fatalf("insert over an existing key: %v, want ErrDocumentExists", err)
	}

	// Replace with a stale CAS, then with the current one.
	cur, err := coll.Get("h2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Upsert("h2", hotel{"Savoy", 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Replace("h2", hotel{"Savoy", 5}, &gocb.ReplaceOptions{Cas: cur.Cas()}); !errors.Is(err, gocb.ErrCasMismatch) {
		t.Fatalf("replace with a stale CAS: %v, want ErrCasMismatch", err)
	}
	if _, err := coll.Replace("missing", hotel{}, nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("replace of a missing document: %v, want ErrDocumentNotFound", err)
	}

	// Remove.
	if _, err := coll.Remove("h2", nil); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := coll.Get("h2", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("get after remove: %v", err)
	}
	if _, err := coll.Remove("h2", nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("second remove: %v, want ErrDocumentNotFound", err)
	}

	// Counters.
	bin := coll.Binary()
	c, err := bin.Increment("visits", &gocb.IncrementOptions{Initial: 10, Delta: 1})
	if err != nil || c.Content() != 10 {
		t.Fatalf("increment creating: %v, %v", c, err)
	}
	c, err = bin.Increment("visits", &gocb.IncrementOptions{Delta: 5})
	if err != nil || c.Content() != 15 {
		t.Fatalf("increment: %v, %v", c, err)
	}
	c, err = bin.Decrement("visits", &gocb.DecrementOptions{Delta: 20})
	if err != nil || c.Content() != 0 {
		t.Fatalf("decrement below 0: %v, %v", c, err)
	}
	if _, err := bin.Increment("nocounter", &gocb.IncrementOptions{Delta: 1, Initial: -1}); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("increment of a missing counter without an initial value: %v", err)
	}

	// The engine holds what the SDK wrote, as every other door sees it.
	b, err := s.eng.Bucket(bucketName)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.DefaultCollection().Get(context.Background(), "visits")
	if err != nil || string(d.Value) != "0" {
		t.Fatalf("engine sees visits = %q, %v", d.Value, err)
	}
}

func TestLookupIn(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	doc := map[string]any{"name": "Ritz", "rooms": []any{map[string]any{"n": 101}, map[string]any{"n": 102}}}
	if _, err := coll.Upsert("h", doc, &gocb.UpsertOptions{Expiry: time.Minute}); err != nil {
		t.Fatal(err)
	}
	res, err := coll.LookupIn("h", []gocb.LookupInSpec{
		gocb.GetSpec("$document.exptime", &gocb.GetSpecOptions{IsXattr: true}),
		gocb.GetSpec("name", nil),
		gocb.GetSpec("rooms[1].n", nil),
		gocb.ExistsSpec("nope", nil),
		gocb.CountSpec("rooms", nil),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var exp int64
	var name string
	var n, count int
	if err := res.ContentAt(0, &exp); err != nil || exp != s.clock.Now()+60 {
		t.Fatalf("$document.exptime = %d, %v", exp, err)
	}
	if err := res.ContentAt(1, &name); err != nil || name != "Ritz" {
		t.Fatalf("name = %q, %v", name, err)
	}
	if err := res.ContentAt(2, &n); err != nil || n != 102 {
		t.Fatalf("rooms[1].n = %d, %v", n, err)
	}
	if res.Exists(3) {
		t.Fatal("nope exists")
	}
	if err := res.ContentAt(4, &count); err != nil || count != 2 {
		t.Fatalf("count(rooms) = %d, %v", count, err)
	}
}

// Each SASL mechanism gocb offers logs in.
func TestMechanisms(t *testing.T) {
	s := start(t)
	for _, m := range []gocb.SaslMechanism{gocb.ScramSha512SaslMechanism, gocb.ScramSha256SaslMechanism, gocb.ScramSha1SaslMechanism, gocb.PlainSaslMechanism} {
		_, coll := s.connect(t, user, password, m)
		if _, err := coll.Upsert("k-"+string(m), 1, nil); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
}

func TestWrongPassword(t *testing.T) {
	s := start(t)
	cl, err := gocb.Connect("couchbase://"+s.addr, gocb.ClusterOptions{
		Username: user, Password: "wrong",
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: 30 * time.Second, KVTimeout: 5 * time.Second},
	})
	if err != nil {
		if !errors.Is(err, gocb.ErrAuthenticationFailure) {
			t.Fatalf("connect: %v, want ErrAuthenticationFailure", err)
		}
		return
	}
	defer cl.Close(nil)
	b := cl.Bucket(bucketName)
	// gocb retries a failed bootstrap until its timeout, as against
	// Couchbase; fail-fast reports the cause.
	err = b.WaitUntilReady(30*time.Second, &gocb.WaitUntilReadyOptions{
		ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeKeyValue}, RetryStrategy: failOnConnectionError{}})
	if !errors.Is(err, gocb.ErrAuthenticationFailure) {
		_, gerr := b.DefaultCollection().Get("k", nil)
		t.Fatalf("wait until ready: %v; get: %v; want ErrAuthenticationFailure", err, gerr)
	}
}

// failOnConnectionError retries until the first connection has been tried,
// then reports its error.
type failOnConnectionError struct{}

func (failOnConnectionError) RetryAfter(_ gocb.RetryRequest, reason gocb.RetryReason) gocb.RetryAction {
	if reason.Description() == "CONNECTION_ERROR" {
		return &gocb.NoRetryRetryAction{}
	}
	return &gocb.WithDurationRetryAction{WithDuration: 20 * time.Millisecond}
}

// Many documents through one connection, to check pipelining keeps order.
func TestManyDocuments(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	const n = 200
	for i := range n {
		if _, err := coll.Upsert("k"+strconv.Itoa(i), map[string]int{"i": i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		r, err := coll.Get("k"+strconv.Itoa(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]int
		if err := r.Content(&v); err != nil || v["i"] != i {
			t.Fatalf("k%d = %v, %v", i, v, err)
		}
	}
}

func TestMutateIn(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	if _, err := coll.Upsert("h", map[string]any{"name": "Ritz", "tags": []string{"a"}, "visits": 1}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := coll.MutateIn("h", []gocb.MutateInSpec{
		gocb.UpsertSpec("stars", 5, nil),
		gocb.InsertSpec("address.city", "London", &gocb.InsertSpecOptions{CreatePath: true}),
		gocb.ReplaceSpec("name", "The Ritz", nil),
		gocb.ArrayAppendSpec("tags", "b", nil),
		gocb.IncrementSpec("visits", 2, nil),
		gocb.RemoveSpec("tags[0]", nil),
	}, &gocb.MutateInOptions{Expiry: time.Hour})
	if err != nil {
		t.Fatalf("MutateIn: %v", err)
	}
	var visits int
	if err := res.ContentAt(4, &visits); err != nil || visits != 3 {
		t.Fatalf("counter result %d, %v", visits, err)
	}
	got, err := coll.Get("h", &gocb.GetOptions{WithExpiry: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := got.Content(&doc); err != nil {
		t.Fatal(err)
	}
	addr, _ := doc["address"].(map[string]any)
	tags, _ := doc["tags"].([]any)
	if doc["name"] != "The Ritz" || doc["stars"] != float64(5) || addr["city"] != "London" || len(tags) != 1 || tags[0] != "b" || doc["visits"] != float64(3) {
		t.Fatalf("after MutateIn: %v", doc)
	}
	if !got.ExpiryTime().Equal(time.Unix(s.clock.Now()+3600, 0)) {
		t.Fatalf("expiry %v", got.ExpiryTime())
	}
	// All or nothing: a failing path leaves the document as it was.
	_, err = coll.MutateIn("h", []gocb.MutateInSpec{
		gocb.UpsertSpec("stars", 1, nil),
		gocb.InsertSpec("name", "x", nil),
	}, nil)
	if !errors.Is(err, gocb.ErrPathExists) {
		t.Fatalf("insert over a path: %v, want ErrPathExists", err)
	}
	var stars int
	if r, err := coll.LookupIn("h", []gocb.LookupInSpec{gocb.GetSpec("stars", nil)}, nil); err != nil || r.ContentAt(0, &stars) != nil || stars != 5 {
		t.Fatalf("stars after a failed MutateIn: %d, %v", stars, err)
	}
	// Upsert a new document.
	if _, err := coll.MutateIn("new", []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, &gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsUpsert}); err != nil {
		t.Fatalf("MutateIn creating: %v", err)
	}
	if _, err := coll.MutateIn("new", []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, &gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsInsert}); !errors.Is(err, gocb.ErrDocumentExists) {
		t.Fatalf("MutateIn insert semantics over a document: %v", err)
	}
	if _, err := coll.MutateIn("missing", []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, nil); !errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("MutateIn on a missing document: %v", err)
	}
}
