package sdktest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
	"github.com/couchbase/gocbcore/v10"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
	"github.com/mayflydb/mayfly/pager"
)

// selfSigned is a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mayfly sdktest"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Unix(4102444800, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// startTLS serves an engine's KV port and HTTP API over TLS only, as
// `mayfly serve --tls-cert` does, and returns the KV TLS address and the
// pool that trusts the certificate.
func startTLS(t testing.TB) (string, *x509.CertPool) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{NoSync: true})
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
	if err := users.PutUser(user, "", password, mustRoles(t, "data_reader["+bucketName+"],data_writer["+bucketName+"]")); err != nil {
		t.Fatal(err)
	}
	cert, pool := selfSigned(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	pm := pager.New(eng, nil)
	t.Cleanup(func() { pm.Close(context.Background()) })

	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: httpapi.New(eng, &httpapi.Options{Auth: users, Pager: pm})}
	go hs.Serve(tls.NewListener(httpLn, cfg))
	t.Cleanup(func() { hs.Close() })
	httpPort := httpLn.Addr().(*net.TCPAddr).Port

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kvPort := ln.Addr().(*net.TCPAddr).Port
	srv, err := kv.New(eng, &kv.Options{Auth: users, PagerStats: pm.Stats,
		Ports: clusterconfig.Ports{KVSSL: kvPort, MgmtSSL: httpPort, CapiSSL: httpPort}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, tls.NewListener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), pool
}

// gocb connects with couchbases:// and the test certificate's CA (PLAIN
// over TLS, gocb's default there) and does key-value work; without the CA
// it does not connect.
func TestTLSConnect(t *testing.T) {
	addr, pool := startTLS(t)
	cl, err := gocb.Connect("couchbases://"+addr, gocb.ClusterOptions{
		Username: user, Password: password,
		SecurityConfig: gocb.SecurityConfig{TLSRootCAs: pool},
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: 30 * time.Second, KVTimeout: kvTimeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(nil) })
	coll := cl.Bucket(bucketName).DefaultCollection()
	if _, err := coll.Upsert("h", hotel{Name: "Ritz", Stars: 5}, &gocb.UpsertOptions{Expiry: time.Hour}); err != nil {
		t.Fatalf("Upsert over TLS: %v", err)
	}
	r, err := coll.Get("h", nil)
	if err != nil {
		t.Fatal(err)
	}
	var h hotel
	if err := r.Content(&h); err != nil || h.Name != "Ritz" {
		t.Fatalf("Get over TLS: %+v, %v", h, err)
	}

	// A client that does not trust the certificate never gets in.
	bad, err := gocb.Connect("couchbases://"+addr, gocb.ClusterOptions{
		Username: user, Password: password,
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: 2 * time.Second, KVTimeout: 2 * time.Second},
	})
	if err != nil {
		return // refused at once: fine
	}
	defer bad.Close(nil)
	if _, err := bad.Bucket(bucketName).DefaultCollection().Get("h", nil); err == nil {
		t.Fatal("a client without the CA read a document")
	}
}

// MutateIn's array insert and add-unique, and LookupIn's count, as an SDK
// user writes them.
func TestArraySpecs(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	if _, err := coll.Upsert("h", map[string]any{"tags": []string{"a", "c"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.MutateIn("h", []gocb.MutateInSpec{
		gocb.ArrayInsertSpec("tags[1]", "b", nil),
		gocb.ArrayAddUniqueSpec("tags", "d", nil),
		gocb.ArrayAddUniqueSpec("rooms", 101, &gocb.ArrayAddUniqueSpecOptions{CreatePath: true}),
	}, nil); err != nil {
		t.Fatalf("MutateIn: %v", err)
	}
	_, err := coll.MutateIn("h", []gocb.MutateInSpec{gocb.ArrayAddUniqueSpec("tags", "a", nil)}, nil)
	if !errors.Is(err, gocb.ErrPathExists) {
		t.Fatalf("add unique of a present value: %v, want ErrPathExists", err)
	}
	_, err = coll.MutateIn("h", []gocb.MutateInSpec{gocb.ArrayInsertSpec("tags[9]", "z", nil)}, nil)
	if !errors.Is(err, gocb.ErrPathNotFound) {
		t.Fatalf("insert past the end: %v, want ErrPathNotFound", err)
	}
	r, err := coll.LookupIn("h", []gocb.LookupInSpec{gocb.GetSpec("tags", nil), gocb.CountSpec("tags", nil), gocb.GetSpec("rooms", nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	var n int
	var rooms []int
	if r.ContentAt(0, &tags) != nil || r.ContentAt(1, &n) != nil || r.ContentAt(2, &rooms) != nil {
		t.Fatal("LookupIn content")
	}
	if len(tags) != 4 || tags[0] != "a" || tags[1] != "b" || tags[2] != "c" || tags[3] != "d" || n != 4 || len(rooms) != 1 || rooms[0] != 101 {
		t.Fatalf("tags %v count %d rooms %v", tags, n, rooms)
	}
}

// STAT through gocbcore's agent (gocb has no public call for it): the
// bucket's cbstats names, as `mayfly stats` prints them.
func TestStats(t *testing.T) {
	s := start(t)
	cl, coll := s.connect(t, user, password)
	for i := range 3 {
		if _, err := coll.Upsert("k"+strconv.Itoa(i), i, nil); err != nil {
			t.Fatal(err)
		}
	}
	agent, err := cl.Bucket(bucketName).Internal().IORouter()
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res *gocbcore.StatsResult
		err error
	}
	done := make(chan result, 1)
	if _, err := agent.Stats(gocbcore.StatsOptions{Key: "", Deadline: time.Now().Add(kvTimeout)}, func(r *gocbcore.StatsResult, err error) {
		done <- result{r, err}
	}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.res.Servers) != 1 {
		t.Fatalf("Stats: %+v, %v", r.res, r.err)
	}
	for _, srv := range r.res.Servers {
		if srv.Error != nil || srv.Stats["curr_items"] != "3" || srv.Stats["ep_max_size"] == "" {
			t.Fatalf("stats %v, %v", srv.Stats, srv.Error)
		}
	}
}

// gocb's Get with a projection (LookupIn on the paths, with the expiry
// when asked) gives back only the paths asked for.
func TestGetProjection(t *testing.T) {
	s := start(t)
	_, coll := s.connect(t, user, password)
	doc := map[string]any{"name": "Ritz", "stars": 5, "address": map[string]any{"city": "London", "street": "Piccadilly"}}
	if _, err := coll.Upsert("h", doc, &gocb.UpsertOptions{Expiry: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r, err := coll.Get("h", &gocb.GetOptions{Project: []string{"name", "address.city"}, WithExpiry: true})
	if err != nil {
		t.Fatalf("Get with a projection: %v", err)
	}
	var got map[string]any
	if err := r.Content(&got); err != nil {
		t.Fatal(err)
	}
	addr, _ := got["address"].(map[string]any)
	if len(got) != 2 || got["name"] != "Ritz" || len(addr) != 1 || addr["city"] != "London" {
		t.Fatalf("projection %v", got)
	}
	if !r.ExpiryTime().Equal(time.Unix(s.clock.Now()+3600, 0)) {
		t.Fatalf("expiry %v", r.ExpiryTime())
	}
}
