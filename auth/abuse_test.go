package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeNow is a clock the tests move by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func openThrottled(t *testing.T, o *Options) (*Store, *fakeNow) {
	t.Helper()
	o.AdminUser, o.AdminPassword, o.Argon2 = "Administrator", "password", cheap
	s, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeNow{t: time.Unix(1_700_000_000, 0)}
	s.now = clk.now
	return s, clk
}

// After its free failures a user name waits, doubling, and a try during the
// wait is refused unchecked, even with the right password; a credential
// verified before the flood still gets in.
func TestThrottlePerUserName(t *testing.T) {
	ctx := context.Background()
	s, clk := openThrottled(t, &Options{Throttle: &Throttle{UserFree: 3, SourceFree: 1000, Base: time.Second, Max: 8 * time.Second}})
	if _, err := s.Authenticate(ctx, "Administrator", "password", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Authenticate(ctx, "Administrator", "wrong", "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	_, err := s.Authenticate(ctx, "Administrator", "wrong2", "10.0.0.9")
	var te *ThrottledError
	if !errors.As(err, &te) || te.Of != "user" || te.RetryAfter != time.Second || !errors.Is(err, ErrThrottled) {
		t.Fatalf("after 3 failures: %v", err)
	}
	// The logged-in caller is answered from the cache.
	if p, err := s.Authenticate(ctx, "Administrator", "password", "10.0.0.1"); err != nil || p.Name != "Administrator" {
		t.Fatalf("cached administrator during the back-off: %v %v", p, err)
	}
	// Another user name is not held back.
	if _, err := s.Authenticate(ctx, "nobody", "x", "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("another name: %v", err)
	}
	clk.add(time.Second)
	if _, err := s.Authenticate(ctx, "Administrator", "wrong3", "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("after the wait: %v", err)
	}
	if _, err := s.Authenticate(ctx, "Administrator", "wrong4", "10.0.0.9"); !errors.As(err, &te) || te.RetryAfter != 2*time.Second {
		t.Fatalf("the second wait doubles: %v", err)
	}
	clk.add(15 * time.Minute) // forgotten
	if _, err := s.Authenticate(ctx, "Administrator", "wrong5", "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("after Forget: %v", err)
	}
}

func TestThrottlePerSource(t *testing.T) {
	ctx := context.Background()
	s, clk := openThrottled(t, &Options{Throttle: &Throttle{UserFree: 1000, SourceFree: 2, Base: time.Minute}})
	for _, name := range []string{"a", "b"} {
		if _, err := s.Authenticate(ctx, name, "pw-"+name, "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
			t.Fatal(err)
		}
	}
	var te *ThrottledError
	if _, err := s.Authenticate(ctx, "Administrator", "password", "10.0.0.9"); !errors.As(err, &te) || te.Of != "source" {
		t.Fatalf("a third try from the source: %v", err)
	}
	if _, err := s.Authenticate(ctx, "Administrator", "password", "10.0.0.1"); err != nil {
		t.Fatalf("another source: %v", err)
	}
	clk.add(time.Minute)
	if _, err := s.Authenticate(ctx, "c", "pw", "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("after the wait: %v", err)
	}
}

// An IPv6 host is throttled by its /64: a host handed a /64 cannot rotate
// through its addresses for a fresh allowance of failures at each. Another
// /64, and IPv4 addresses (mapped ones too), are their own sources.
func TestThrottlePerSourceIPv6Network(t *testing.T) {
	ctx := context.Background()
	s, _ := openThrottled(t, &Options{Throttle: &Throttle{UserFree: 1000, SourceFree: 2, Base: time.Minute}})
	for i, src := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2"} {
		if _, err := s.Authenticate(ctx, "n"+src, "pw", src); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("failure %d from %s: %v", i, src, err)
		}
	}
	var te *ThrottledError
	if _, err := s.Authenticate(ctx, "Administrator", "password", "2001:db8:1:2:ffff::3"); !errors.As(err, &te) || te.Of != "source" {
		t.Fatalf("a third try from the same /64, another address: %v; want throttled as a source", err)
	}
	if _, err := s.Authenticate(ctx, "Administrator", "password", "2001:db8:1:3::1"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
	for _, src := range []string{"10.0.0.7", "::ffff:10.0.0.7"} {
		if _, err := s.Authenticate(ctx, "m", "pw", src); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("from %s: %v", src, err)
		}
	}
	// (The administrator's login is answered from the cache by now.)
	if _, err := s.Authenticate(ctx, "z", "pw", "10.0.0.7"); !errors.As(err, &te) || te.Of != "source" {
		t.Fatalf("10.0.0.7 after two failures, one through its IPv4-mapped form: %v; want throttled", err)
	}
	if _, err := s.Authenticate(ctx, "z", "pw", "10.0.0.8"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("another IPv4 address: %v; want its password checked", err)
	}
}

// A cached verification lasts VerifyCacheTTL, then the password is checked
// again (and the back-off applies again).
func TestVerifyCacheExpires(t *testing.T) {
	ctx := context.Background()
	s, clk := openThrottled(t, &Options{VerifyCacheTTL: time.Minute, Throttle: &Throttle{UserFree: 1, Base: time.Hour, Max: time.Hour}})
	if _, err := s.Authenticate(ctx, "Administrator", "password", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "Administrator", "bad", "10.0.0.9"); !errors.Is(err, ErrBadCredentials) {
		t.Fatal(err)
	}
	clk.add(59 * time.Second)
	if _, err := s.Authenticate(ctx, "Administrator", "password", ""); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	clk.add(time.Second)
	if _, err := s.Authenticate(ctx, "Administrator", "password", ""); !errors.Is(err, ErrThrottled) {
		t.Fatalf("after the TTL the name's back-off applies: %v", err)
	}
}

// Checks beyond MaxPending are refused at once with ErrBusy; concurrent
// tries of one credential share one check.
func TestMaxPendingAndSharedChecks(t *testing.T) {
	ctx := context.Background()
	s, _ := openThrottled(t, &Options{MaxPending: 1, Throttle: &Throttle{UserFree: 1000, SourceFree: 1000}})
	// Hold every CPU slot so that checks wait.
	for range cap(s.hashSlots) {
		s.hashSlots <- struct{}{}
	}
	errs := make(chan error, 10)
	for range 5 {
		go func() { _, err := s.Authenticate(ctx, "Administrator", "same-wrong", ""); errs <- err }()
	}
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		c := s.checking[s.mac("Administrator", "same-wrong")]
		return c != nil && c.waiters == 4 && s.pending.Load() == 1
	})
	if _, err := s.Authenticate(ctx, "Administrator", "other-wrong", ""); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second distinct check: %v", err)
	}
	for range cap(s.hashSlots) {
		<-s.hashSlots
	}
	for range 5 {
		if err := <-errs; !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("shared check: %v", err)
		}
	}
	// One failure was counted for the five tries that shared one check.
	if f := s.names.keys["Administrator"]; f == nil || f.n != 1 {
		t.Fatalf("failures counted: %+v", f)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// The verification cache's key of a credential is HMAC-SHA256(cacheKey,
// name NUL password), the same on every call (its state is pooled), and
// costs no allocation once warm.
func TestMacPooled(t *testing.T) {
	s, _ := openThrottled(t, &Options{})
	want := func(name, password string) [32]byte {
		m := hmac.New(sha256.New, s.cacheKey[:])
		m.Write([]byte(name + "\x00" + password))
		return [32]byte(m.Sum(nil))
	}
	for range 3 {
		for _, c := range [][2]string{{"Administrator", "password"}, {"a", "b\x00c"}, {"a\x00b", "c"}, {"", ""}} {
			if got := s.mac(c[0], c[1]); got != want(c[0], c[1]) {
				t.Fatalf("mac(%q, %q) = %x, want %x", c[0], c[1], got, want(c[0], c[1]))
			}
		}
	}
	if raceBuild {
		return // sync.Pool drops at random under the race detector
	}
	if n := testing.AllocsPerRun(100, func() { s.mac("Administrator", "password") }); n != 0 {
		t.Errorf("%v allocations per mac, want 0", n)
	}
}

// A credential answered from the cache gets the principal made when it was
// cached, without parsing the user's roles again for each request; a change
// of the user's roles is seen at once (the cached entry names the user
// record it was made from).
func TestVerifyCacheKeepsPrincipalUntilRolesChange(t *testing.T) {
	ctx := context.Background()
	s, clk := openThrottled(t, &Options{VerifyCacheTTL: time.Minute})
	reader := []Role{{Name: RoleDataReader, Bucket: "b"}}
	if err := s.PutUser("u", "", "secret1", reader); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "u", "secret1", ""); err != nil { // checked, cached
		t.Fatal(err)
	}
	p1, err := s.Authenticate(ctx, "u", "secret1", "")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.Authenticate(ctx, "u", "secret1", "")
	if err != nil {
		t.Fatal(err)
	}
	if p1 != p2 || !p2.Allows(Permission{Action: DataRead, Bucket: "b"}) {
		t.Fatalf("cache hits: %p %+v, then %p %+v; want one principal, with data_reader on b", p1, p1, p2, p2)
	}
	if err := s.PutUser("u", "", "", []Role{{Name: RoleDataWriter, Bucket: "b"}}); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	p3, err := s.Authenticate(ctx, "u", "secret1", "")
	if err != nil {
		t.Fatal(err)
	}
	if p3.Allows(Permission{Action: DataRead, Bucket: "b"}) || !p3.Allows(Permission{Action: DataWrite, Bucket: "b"}) {
		t.Fatalf("after the roles changed: %+v; want data_writer only", p3)
	}
}

// A login refused before any check (a name over MaxUserName bytes, an
// empty password, a malformed SCRAM exchange: FailUnchecked) is a failed
// login of its source like a wrong password, so every door's throttle
// holds it back after SourceFree; a review found that such names skipped
// the throttle, letting one source write a failed-login record per try.
// Such a try counts for its source only: it guesses no password of the
// name, and a long name would cost its length to track.
func TestUncheckedFailuresCountForTheSource(t *testing.T) {
	ctx := context.Background()
	s, _ := openThrottled(t, &Options{Throttle: &Throttle{UserFree: 1000, SourceFree: 3, Base: time.Minute}})
	long := strings.Repeat("n", MaxUserName+1)
	if _, err := s.Authenticate(ctx, long+"1", "pw", "10.0.0.7"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("a name over %d bytes: %v", MaxUserName, err)
	}
	if _, err := s.Authenticate(ctx, "someone", "", "10.0.0.7"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("an empty password: %v", err)
	}
	if _, _, err := s.VerifyScram(long+"2", CredScramSHA256, "10.0.0.7", []byte("m"), []byte("p")); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("SCRAM with a name over %d bytes: %v", MaxUserName, err)
	}
	var te *ThrottledError
	if _, err := s.Authenticate(ctx, long+"3", "pw", "10.0.0.7"); !errors.As(err, &te) || te.Of != "source" {
		t.Fatalf("after 3 unchecked failures from the source: %v, want throttled", err)
	}
	if err := s.FailUnchecked("someone", "10.0.0.7"); !errors.As(err, &te) || te.Of != "source" {
		t.Fatalf("a malformed exchange from the throttled source: %v, want throttled", err)
	}
	if _, err := s.Authenticate(ctx, long+"4", "pw", "10.0.0.8"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("another source: %v", err)
	}
	s.names.mu.Lock()
	if n := len(s.names.keys); n != 0 {
		t.Errorf("the name throttle tracks %d names after tries refused unchecked; want none", n)
	}
	s.names.mu.Unlock()
}

// ShownName cuts a name to MaxUserName bytes of valid UTF-8.
func TestShownNameIsBounded(t *testing.T) {
	for _, name := range []string{"alice", strings.Repeat("é", 200), strings.Repeat("x", 5000), "bad\xffutf8"} {
		got := ShownName(name)
		if len(got) > MaxUserName || !utf8.ValidString(got) {
			t.Errorf("ShownName(%.20q…) = %d bytes, valid UTF-8 %v", name, len(got), utf8.ValidString(got))
		}
	}
	if got := ShownName("alice"); got != "alice" {
		t.Errorf("a short name is shown as %q", got)
	}
}
