package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/mayflydb/mayfly/internal/reason"
)

// FileName is the users file in the data directory.
const FileName = "users.json"

// Errors of the Store.
var (
	ErrBadCredentials = errors.New("wrong user name or password")
	ErrUserNotFound   = errors.New("user was not found")
	ErrInvalidUser    = errors.New("invalid user")
	// ErrThrottled refuses a login try, unchecked, from a source address or
	// for a user name that failed too often lately (see Throttle). The
	// error is a *ThrottledError.
	ErrThrottled = errors.New("too many failed logins")
	// ErrBusy refuses a login try, unchecked, when Options.MaxPending
	// password checks are already waiting.
	ErrBusy = errors.New("too many password checks waiting")
	// ErrUsersPending refuses a login try, unchecked, by a stored user
	// while the store awaits the users it is to hold (AwaitUsers: a
	// cluster node's users are the cluster's, and its users.json may be
	// stale): a temporary failure, to retry. The administrator is not
	// refused so.
	ErrUsersPending = errors.New("this node has not loaded the cluster's users yet")
)

// ThrottledError is ErrThrottled with the wait left.
type ThrottledError struct {
	// Of says what is throttled: "source" or "user".
	Of string
	// RetryAfter is how long until the next try is checked.
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%v for this %s; retry in %s", ErrThrottled, e.Of, e.RetryAfter.Round(time.Second))
}

// Unwrap makes errors.Is(err, ErrThrottled) hold.
func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// MaxUserName is the longest user name, in bytes (Couchbase's limit).
const MaxUserName = 128

// Argon2Params are argon2id's cost parameters. They are stored with every
// hash, so raising them later leaves old hashes verifiable.
type Argon2Params struct {
	Time    uint32 `json:"time"`
	Memory  uint32 `json:"memory_kib"`
	Threads uint8  `json:"threads"`
	KeyLen  uint32 `json:"key_len"`
}

// DefaultArgon2 is OWASP's minimum recommendation for argon2id (19 MiB, two
// passes, one lane).
var DefaultArgon2 = Argon2Params{Time: 2, Memory: 19 * 1024, Threads: 1, KeyLen: 32}

// Credential is one stored credential of a user, under its kind in
// User.Credentials: "argon2id" today (the REST password); the shape leaves room
// for "scram-sha-1"/"scram-sha-256"/"scram-sha-512" (salt, iterations, stored
// and server keys) when the KV port learns SASL.
type Credential struct {
	Argon2     *Argon2Params `json:"argon2,omitempty"`
	Iterations int           `json:"iterations,omitempty"` // SCRAM
	Salt       []byte        `json:"salt"`
	Hash       []byte        `json:"hash,omitempty"`
	StoredKey  []byte        `json:"stored_key,omitempty"` // SCRAM
	ServerKey  []byte        `json:"server_key,omitempty"` // SCRAM
}

// CredArgon2id is the kind of the password hash.
const CredArgon2id = "argon2id"

// User is a stored local user.
type User struct {
	ID          string                `json:"id"`
	Name        string                `json:"name,omitempty"`
	Roles       []string              `json:"roles"`
	Credentials map[string]Credential `json:"credentials"`
	// PasswordChanged is when the password was last set (Unix seconds, 0
	// for users stored before it was recorded).
	PasswordChanged int64 `json:"password_changed,omitempty"`
	// Incarnation is random, given when the user is created and kept by
	// every change of it (password, roles): a user deleted and created
	// again under the same name is another incarnation, so a connection
	// logged in as the first is not carried over to the second
	// (Store.Refresh). "" for users stored before it was recorded; they
	// keep "" until deleted.
	Incarnation string `json:"incarnation,omitempty"`
}

// usersFileVersion is the format of users.json this version writes.
const usersFileVersion = 1

// usersFile is users.json: its format version and the users.
type usersFile struct {
	Version int    `json:"version"`
	Users   []User `json:"users"`
}

// Options configure a Store.
type Options struct {
	// AdminUser and AdminPassword are the built-in administrator (role admin).
	// It is not stored in users.json: the flags define it on every start.
	// An empty AdminPassword means no administrator can log in.
	AdminUser     string
	AdminPassword string
	// Argon2 overrides DefaultArgon2 for new hashes (tests use cheap ones).
	Argon2 *Argon2Params
	// VerifyCacheTTL is how long a successful password check is remembered,
	// keyed by an HMAC of the user name and password under a key made at
	// start (never the password): the same credential within that time
	// skips argon2 and every throttle. A change of the user forgets it at
	// once. The default value is 5m; a negative value caches nothing.
	VerifyCacheTTL time.Duration
	// MaxPending bounds the password checks (argon2, run NumCPU at a time)
	// waiting or running at once; one more is refused with ErrBusy at once.
	// Concurrent checks of the same credential share one computation. The
	// default value is 8 per CPU, at least 16.
	MaxPending int
	// Throttle sets the back-off after failed logins. nil means
	// DefaultThrottle().
	Throttle *Throttle
	// ScramIterations is the PBKDF2 iteration count of new SCRAM
	// credentials. The default value is DefaultScramIterations.
	ScramIterations int
}

// Store holds the users. It is safe for concurrent use.
type Store struct {
	path   string
	params Argon2Params
	// scramIter is Options.ScramIterations.
	scramIter int
	admin     *User // nil without an administrator password
	// hashSlots bounds concurrent argon2 computations (each takes Memory KiB).
	hashSlots chan struct{}
	// lastRelease is when releaseHash last gave argon2's memory back
	// (UnixNano).
	lastRelease atomic.Int64
	// releaseDue is set while a release put off by the one-a-second pace
	// waits for its timer (releaseMemory).
	releaseDue atomic.Bool
	// freeOS gives the heap's free memory back to the system
	// (debug.FreeOSMemory; a test counts its calls).
	freeOS   func()
	cacheKey [32]byte  // random per process; keys the verification cache
	macs     sync.Pool // *macState keyed with cacheKey, for mac
	dummy    Credential
	cacheTTL time.Duration
	// pending counts checks waiting or running; at most maxPending.
	pending    atomic.Int64
	maxPending int64
	sources    *backoff // failures per source address
	names      *backoff // failures per user name
	now        func() time.Time

	// awaiting is set from AwaitUsers until the next ReplaceUsers: the
	// stored users do not log in meanwhile (ErrUsersPending).
	awaiting atomic.Bool

	// gen counts the changes of the users (PutUser, DeleteUser,
	// DropBucketRoles, ReplaceUsers), so that a connection holding a Principal knows
	// when to look it up again.
	gen atomic.Uint64

	mu    sync.Mutex
	users map[string]*User
	// verified caches successful verifications: HMAC(cacheKey, name NUL
	// password) → the user verified and until when, so each request does
	// not pay argon2. An entry holds only while its user is unchanged.
	verified map[[32]byte]verifiedEntry
	// checking holds the checks in flight, by the same HMAC: concurrent
	// checks of one credential wait for the first.
	checking map[[32]byte]*check
	// changed is closed, and replaced, at the next change of the users
	// (Changed).
	changed chan struct{}
}

// verifiedEntry is one cached verification.
type verifiedEntry struct {
	u       *User
	p       *Principal // u's, made once: nil if its roles did not parse
	expires time.Time
}

// check is a password check in flight; done closes when ok and err are set.
type check struct {
	done    chan struct{}
	waiters int // tries sharing it; REQUIRES: Store.mu
	u       *User
	ok      bool
	err     error
}

// Open loads dir/users.json (none yet is no users).
func Open(dir string, opts *Options) (*Store, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	th := DefaultThrottle()
	if o.Throttle != nil {
		t := *o.Throttle
		t.EnsureDefaults()
		th = &t
	}
	if o.VerifyCacheTTL == 0 {
		o.VerifyCacheTTL = 5 * time.Minute
	}
	if o.MaxPending <= 0 {
		o.MaxPending = max(16, 8*runtime.NumCPU())
	}
	s := &Store{
		path:       filepath.Join(dir, FileName),
		params:     DefaultArgon2,
		hashSlots:  make(chan struct{}, max(1, runtime.NumCPU())),
		freeOS:     debug.FreeOSMemory,
		cacheTTL:   o.VerifyCacheTTL,
		maxPending: int64(o.MaxPending),
		sources:    newBackoff(th, th.SourceFree),
		names:      newBackoff(th, th.UserFree),
		now:        time.Now, // wall clock: login throttling and the verification cache's lifetime
		users:      map[string]*User{},
		verified:   map[[32]byte]verifiedEntry{},
		checking:   map[[32]byte]*check{},
		changed:    make(chan struct{}),
	}
	if o.Argon2 != nil {
		s.params = *o.Argon2
	}
	s.scramIter = o.ScramIterations
	if s.scramIter <= 0 {
		s.scramIter = DefaultScramIterations
	}
	if _, err := rand.Read(s.cacheKey[:]); err != nil {
		return nil, err
	}
	s.dummy = s.hash("dummy password, never matched")
	if o.AdminPassword != "" {
		if err := validName(o.AdminUser); err != nil {
			return nil, fmt.Errorf("administrator: %w", err)
		}
		s.admin = &User{ID: o.AdminUser, Name: "Administrator", Roles: []string{RoleAdmin},
			Credentials: s.scramCredentials(o.AdminPassword)}
		s.admin.Credentials[CredArgon2id] = s.hash(o.AdminPassword)
	}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var f usersFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	// A newer format is refused rather than read in part: the next change
	// would rewrite the file in this one, dropping what it cannot read.
	if f.Version > usersFileVersion {
		return nil, fmt.Errorf("%s: format %d, written by a newer Mayfly (this one reads format %d or older): run that version or a later one on this data directory", s.path, f.Version, usersFileVersion)
	}
	for i := range f.Users {
		u := f.Users[i]
		if _, err := parseRoleList(u.Roles); err != nil {
			return nil, fmt.Errorf("%s: user %q: %w", s.path, u.ID, err)
		}
		s.users[u.ID] = &u
	}
	return s, nil
}

// HasAdmin reports whether an administrator password is configured.
func (s *Store) HasAdmin() bool { return s.admin != nil }

// AdminName is the built-in administrator's user name; "" without an
// administrator password (no administrator can log in).
func (s *Store) AdminName() string {
	if s.admin == nil {
		return ""
	}
	return s.admin.ID
}

// AwaitUsers makes the stored users (users.json's, as loaded) not log in
// until the next ReplaceUsers: Authenticate, VerifyScram and Lookup
// refuse them with ErrUsersPending, their passwords unchecked, and
// ScramCredential knows none of them. The built-in administrator is not
// affected. A cluster node calls it before it serves: its users are the
// cluster's, and a file written before the node was last stopped may
// still hold a user deleted since, or an old password.
func (s *Store) AwaitUsers() { s.awaiting.Store(true) }

// held reports whether user name is refused with ErrUsersPending
// (AwaitUsers).
func (s *Store) held(name string) bool {
	return s.awaiting.Load() && (s.admin == nil || name != s.admin.ID)
}

func parseRoleList(names []string) ([]Role, error) {
	return ParseRoles(strings.Join(names, ","))
}

func (s *Store) hash(password string) Credential {
	var salt [16]byte
	if _, err := rand.Read(salt[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	p := s.params
	return Credential{Argon2: &p, Salt: salt[:], Hash: s.argon2(p, password, salt[:])}
}

func (s *Store) argon2(p Argon2Params, password string, salt []byte) []byte {
	s.hashSlots <- struct{}{}
	defer s.releaseHash()
	return argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
}

// releaseHash frees an argon2 slot. The last computation in flight also
// gives the memory back to the system (releaseMemory): each took
// Params.Memory KiB (19 MiB by default) that is garbage at once but that Go
// would otherwise keep resident until its scavenger gets to it.
func (s *Store) releaseHash() {
	<-s.hashSlots
	if len(s.hashSlots) > 0 {
		return
	}
	s.releaseMemory()
}

// releaseMemory gives argon2's memory back to the system, at most once a
// second: within a second of the last release it is put off until that
// second has passed, not dropped. A login right after start (the
// administrator's password was hashed at Open) otherwise left its 19 MiB
// resident until the server's idle release ran, and a load meanwhile grew
// the heap on top of it (BENCHMARKS.md, "Sets at `none`: resident memory
// during the run").
func (s *Store) releaseMemory() {
	now := time.Now().UnixNano() // wall clock: only paces the release
	last := s.lastRelease.Load()
	if wait := last + int64(time.Second) - now; wait > 0 {
		if s.releaseDue.CompareAndSwap(false, true) {
			time.AfterFunc(time.Duration(wait), func() {
				s.releaseDue.Store(false)
				if len(s.hashSlots) == 0 { // else the last in flight releases
					s.releaseMemory()
				}
			})
		}
		return
	}
	if !s.lastRelease.CompareAndSwap(last, now) {
		return
	}
	s.freeOS()
}

// verify checks password against an argon2id credential, waiting for a
// CPU slot no longer than ctx allows.
func (s *Store) verify(ctx context.Context, c Credential, password string) (bool, error) {
	select {
	case s.hashSlots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer s.releaseHash()
	if c.Argon2 == nil || len(c.Hash) == 0 || c.Argon2.KeyLen != uint32(len(c.Hash)) {
		c = s.dummy // the same cost as a real check
		password = ""
	}
	got := argon2.IDKey([]byte(password), c.Salt, c.Argon2.Time, c.Argon2.Memory, c.Argon2.Threads, c.Argon2.KeyLen)
	return subtle.ConstantTimeCompare(got, c.Hash) == 1 && password != "", nil
}

// mac is the verification cache's key of a credential.
//
// Every authenticated request asks for one, so the HMAC state and the
// bytes it reads come from a pool (s.macs) rather than new each time:
// they were a tenth of the garbage of a 100-row view query (issue 19).
func (s *Store) mac(name, password string) [32]byte {
	st, _ := s.macs.Get().(*macState)
	if st == nil {
		st = &macState{h: hmac.New(sha256.New, s.cacheKey[:])}
	}
	st.h.Reset()
	st.buf = append(append(append(st.buf[:0], name...), 0), password...)
	st.h.Write(st.buf)
	st.sum = st.h.Sum(st.sum[:0])
	var out [32]byte
	copy(out[:], st.sum)
	clear(st.buf) // no password left in a pooled buffer
	s.macs.Put(st)
	return out
}

// macState is a pooled HMAC of the verification cache's key and the
// buffer it hashes from.
type macState struct {
	h        hash.Hash
	buf, sum []byte
}

// userLocked returns the user named name, the administrator included.
// REQUIRES: s.mu.
func (s *Store) userLocked(name string) *User {
	if s.admin != nil && name == s.admin.ID {
		return s.admin
	}
	return s.users[name]
}

// forgetLocked drops the cached verifications of user id.
// REQUIRES: s.mu.
func (s *Store) forgetLocked(id string) {
	for k, e := range s.verified {
		if e.u.ID == id {
			delete(s.verified, k)
		}
	}
}

// Authenticate returns the principal of a user name and password tried from
// source (an address without its port; "" for none, which is not
// throttled). It fails with ErrBadCredentials (for an unknown user too, after
// the same work), ErrThrottled (a *ThrottledError: the source or the name
// failed too often lately; the password was not checked), ErrBusy (too many
// checks waiting), ErrUsersPending (a stored user while the store awaits
// its users: AwaitUsers) or ctx's error.
//
// A credential that succeeded within Options.VerifyCacheTTL is answered from
// the cache at once, throttled or not: a flood of wrong passwords never
// locks out a caller already logged in. Such answers share one Principal,
// made when the credential was cached: callers must not change it.
func (s *Store) Authenticate(ctx context.Context, name, password, source string) (*Principal, error) {
	if password == "" || len(name) > MaxUserName || len(password) > maxPassword {
		// No user has such a credential: refused without a check, but a
		// failed login all the same, counted in the source's throttle.
		return nil, s.FailUnchecked(name, source)
	}
	if s.held(name) {
		return nil, ErrUsersPending
	}
	key := s.mac(name, password)
	now := s.now()
	s.mu.Lock()
	u := s.userLocked(name)
	if e, ok := s.verified[key]; ok && u != nil && e.u == u && now.Before(e.expires) {
		s.mu.Unlock()
		if e.p != nil {
			return e.p, nil
		}
		return principalOf(u)
	}
	s.mu.Unlock()
	if d := s.sources.wait(sourceKey(source), now); d > 0 {
		return nil, &ThrottledError{Of: "source", RetryAfter: d}
	}
	if d := s.names.wait(name, now); d > 0 {
		return nil, &ThrottledError{Of: "user", RetryAfter: d}
	}

	s.mu.Lock()
	c, joined := s.checking[key]
	if joined {
		c.waiters++
	} else {
		c = &check{done: make(chan struct{}), u: u}
		s.checking[key] = c
	}
	s.mu.Unlock()
	if joined {
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		// The check is shared: it runs to its end even if this caller
		// leaves (it is one of at most MaxPending), so that those waiting
		// for it get its answer rather than this caller's ctx error.
		s.runCheck(context.WithoutCancel(ctx), key, c, name, password, source)
	}
	if c.err != nil {
		return nil, c.err
	}
	if !c.ok {
		return nil, ErrBadCredentials
	}
	return principalOf(c.u)
}

// FailUnchecked records a login from source that failed before any
// credential could be checked (a name over MaxUserName bytes, an empty
// password, a malformed SCRAM exchange): it returns a *ThrottledError,
// counting nothing, when the source or the name is waiting, as a checked
// login would; else it counts a failure of the source, as a wrong password
// does, and returns ErrBadCredentials. The name's count is left alone: a
// try that could not succeed guesses no password of the name. Every door
// calls it (or Authenticate, VerifyScram, which do) for every failed
// login, so that no malformed try escapes the source's back-off.
func (s *Store) FailUnchecked(name, source string) error {
	now := s.now()
	src := sourceKey(source)
	if d := s.sources.wait(src, now); d > 0 {
		return &ThrottledError{Of: "source", RetryAfter: d}
	}
	if d := s.names.wait(nameKey(name), now); d > 0 {
		return &ThrottledError{Of: "user", RetryAfter: d}
	}
	s.sources.fail(src, now)
	return ErrBadCredentials
}

// nameKey is the key a user name's back-off is looked up under: the name,
// or "" (none) for one over MaxUserName bytes, which no user has.
func nameKey(name string) string {
	if len(name) > MaxUserName {
		return ""
	}
	return name
}

// ShownName is a user name as a log line or an audit record holds it: cut
// to MaxUserName bytes on a rune boundary, ending in "…" when cut, each run
// of bytes that is not UTF-8 shown as "?" (reason.Cap), so that a name
// sent before authentication, of any length, costs bounded disk and reads
// as sent around a bad byte.
func ShownName(name string) string {
	return reason.Cap(name, MaxUserName)
}

// maxPassword is the longest password PutUser takes.
const maxPassword = 1024

// runCheck does check c of a credential (key) and publishes its outcome:
// the cache on success, the throttles on failure.
func (s *Store) runCheck(ctx context.Context, key [32]byte, c *check, name, password, source string) {
	defer func() {
		s.mu.Lock()
		delete(s.checking, key)
		s.mu.Unlock()
		close(c.done)
	}()
	if s.pending.Add(1) > s.maxPending {
		s.pending.Add(-1)
		c.err = ErrBusy
		return
	}
	defer s.pending.Add(-1)
	cred := s.dummy
	if c.u != nil {
		cred = c.u.Credentials[CredArgon2id]
	}
	ok, err := s.verify(ctx, cred, password)
	if err != nil {
		c.err = err
		return
	}
	now := s.now()
	c.ok = ok && c.u != nil
	if !c.ok {
		s.sources.fail(sourceKey(source), now)
		s.names.fail(name, now)
		return
	}
	s.names.clear(name)
	if s.cacheTTL <= 0 {
		return
	}
	s.mu.Lock()
	if s.userLocked(name) == c.u { // not changed meanwhile
		p, _ := principalOf(c.u) // nil on error: a hit then answers principalOf's error
		s.verified[key] = verifiedEntry{u: c.u, p: p, expires: now.Add(s.cacheTTL)}
	}
	s.mu.Unlock()
}

func principalOf(u *User) (*Principal, error) {
	roles, err := parseRoleList(u.Roles)
	if err != nil {
		return nil, err
	}
	return &Principal{Name: u.ID, Incarnation: u.Incarnation, Roles: roles}, nil
}

// newIncarnation returns a new random User.Incarnation (16 bytes, hex).
func newIncarnation() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}

// UserInfo is a user as the REST API shows it: no credentials.
type UserInfo struct {
	ID    string
	Name  string
	Roles []Role
	// PasswordChanged is when the password was last set; zero when unknown
	// (a user stored before Mayfly recorded it).
	PasswordChanged time.Time
}

func info(u *User) UserInfo {
	roles, _ := parseRoleList(u.Roles)
	ui := UserInfo{ID: u.ID, Name: u.Name, Roles: roles}
	if u.PasswordChanged != 0 {
		ui.PasswordChanged = time.Unix(u.PasswordChanged, 0).UTC()
	}
	return ui
}

// Users lists the stored users by id (not the built-in administrator).
func (s *Store) Users() []UserInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]UserInfo, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, info(u))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// User returns one stored user.
func (s *Store) User(id string) (UserInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	if !ok {
		return UserInfo{}, fmt.Errorf("%w: %q", ErrUserNotFound, id)
	}
	return info(u), nil
}

func validName(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the user name is empty", ErrInvalidUser)
	case len(id) > MaxUserName:
		return fmt.Errorf("%w: the user name is over %d bytes", ErrInvalidUser, MaxUserName)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: the user name is not UTF-8", ErrInvalidUser)
	case strings.ContainsAny(id, "()<>@,;:\\\"/[]?={} \t\r\n"):
		return fmt.Errorf("%w: the user name holds a character Couchbase forbids: ()<>@,;:\\\"/[]?={} or a space", ErrInvalidUser)
	}
	return nil
}

// UserChange is a creation or replacement of one user, checked and with
// its password hashed (PrepareUser), to be applied over the user as it
// stands (Apply): PutUser applies it to the store, a cluster node to the
// cluster's record of the user, so the costly hashing is done once, by the
// node asked.
type UserChange struct {
	id, name string
	roles    []string
	// creds are the new password's credentials; nil keeps the old ones.
	creds map[string]Credential
	// at is when the password was set (Unix seconds).
	at int64
	// incarnation is the user's Incarnation when the change creates it.
	incarnation string
}

// ID is the user the change is of.
func (c *UserChange) ID() string { return c.id }

// Buckets lists the buckets the change's roles name, each once, in the
// roles' order ([*] and roles without a bucket name none): those that
// must exist for the change to be made (RolesOnMissingBuckets).
func (c *UserChange) Buckets() []string {
	var out []string
	for _, name := range c.roles {
		r, err := ParseRole(name)
		if err == nil && r.Bucket != "" && r.Bucket != "*" && !slices.Contains(out, r.Bucket) {
			out = append(out, r.Bucket)
		}
	}
	return out
}

// RolesOnMissingBuckets is the error refusing roles (as Role.String
// writes them) given on buckets that do not exist, as Couchbase refuses
// them (ErrInvalidRole, a 400): a role given before its bucket would
// read a bucket created later under that name, whoever meant it for.
func RolesOnMissingBuckets(roles []string) error {
	return fmt.Errorf("%w: cannot assign roles to user because the following roles are unknown, malformed or role parameters are undefined: [%s] (no such bucket; create it first)",
		ErrInvalidRole, strings.Join(roles, ","))
}

// Roles lists the change's roles as Role.String writes them.
func (c *UserChange) Roles() []string { return slices.Clone(c.roles) }

// PrepareUser checks a creation or replacement of user id (password ""
// keeps an existing user's password; a new user needs one; roles replace
// the old ones) and hashes its password: ErrInvalidUser for a bad name or
// password, or the built-in administrator's name.
func (s *Store) PrepareUser(id, name, password string, roles []Role) (*UserChange, error) {
	if err := validName(id); err != nil {
		return nil, err
	}
	if s.admin != nil && id == s.admin.ID {
		return nil, fmt.Errorf("%w: %q is the built-in administrator (set by mayfly serve --admin-user/--admin-password)", ErrInvalidUser, id)
	}
	if password != "" && len(password) < 6 {
		return nil, fmt.Errorf("%w: the password must be at least 6 characters", ErrInvalidUser)
	}
	if len(password) > maxPassword {
		return nil, fmt.Errorf("%w: the password is over %d bytes", ErrInvalidUser, maxPassword)
	}
	c := &UserChange{id: id, name: name, roles: make([]string, len(roles)), incarnation: newIncarnation()}
	for i, r := range roles {
		c.roles[i] = r.String()
	}
	if password != "" {
		c.creds = s.scramCredentials(password)
		c.creds[CredArgon2id] = s.hash(password)
		c.at = s.now().Unix()
	}
	return c, nil
}

// Apply returns the user the change makes of cur (the user as it stands;
// nil when there is none): its name and roles replaced, its credentials
// the new password's or, without one, cur's; its Incarnation cur's, or a
// new one when there is no cur. A new user without a password is
// ErrInvalidUser. cur is not changed.
func (c *UserChange) Apply(cur *User) (*User, error) {
	u := &User{ID: c.id, Name: c.name, Roles: slices.Clone(c.roles), Credentials: map[string]Credential{}, Incarnation: c.incarnation}
	if cur != nil {
		u.PasswordChanged = cur.PasswordChanged
		u.Incarnation = cur.Incarnation
		maps.Copy(u.Credentials, cur.Credentials)
	}
	switch {
	case c.creds != nil:
		maps.Copy(u.Credentials, c.creds)
		u.PasswordChanged = c.at
	case cur == nil:
		return nil, fmt.Errorf("%w: a new user needs a password", ErrInvalidUser)
	}
	return u, nil
}

// PutUser creates or replaces user id. password "" keeps an existing user's
// password (a new user needs one); roles replace the old ones.
func (s *Store) PutUser(id, name, password string, roles []Role) error {
	c, err := s.PrepareUser(id, name, password, roles)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.users[id]
	u, err := c.Apply(old)
	if err != nil {
		return err
	}
	s.users[id] = u
	s.forgetLocked(id)
	if err := s.saveLocked(); err != nil {
		if old != nil {
			s.users[id] = old
		} else {
			delete(s.users, id)
		}
		return err
	}
	s.changedLocked()
	return nil
}

// Records returns a copy of every stored user as users.json holds it
// (credentials included; not the built-in administrator, nor a record of
// its name, left in the file from before the administrator was named
// so), sorted by id: a cluster node writes them to the cluster's state
// when it has none of theirs.
func (s *Store) Records() []User {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]User, 0, len(s.users))
	for _, u := range s.users {
		if s.admin != nil && u.ID == s.admin.ID {
			continue
		}
		out = append(out, cloneUser(u))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// cloneUser copies u deeply enough that neither copy's changes reach the
// other (credentials are never changed in place).
func cloneUser(u *User) User {
	c := *u
	c.Roles = slices.Clone(u.Roles)
	c.Credentials = maps.Clone(u.Credentials)
	return c
}

// ReplaceUsers makes the stored users those given (a cluster node applies
// the cluster's users so): users not given are removed, those that differ
// replaced, and users.json written when anything changed. A user named as
// the built-in administrator is left out (each node's administrator is its
// own); so is one whose roles do not parse, reported in the error
// (ErrInvalidUser) with the others applied; any other error (users.json
// could not be written) changed nothing. Users that changed lose their cached logins, and
// Generation and Changed move, as with PutUser. It reports whether
// anything changed. Once it returns without such an error, the stored
// users log in again (AwaitUsers).
func (s *Store) ReplaceUsers(users []User) (bool, error) {
	want := make(map[string]*User, len(users))
	var bad []error
	for i := range users {
		u := cloneUser(&users[i])
		if s.admin != nil && u.ID == s.admin.ID {
			continue
		}
		if err := validName(u.ID); err != nil {
			bad = append(bad, err)
			continue
		}
		if _, err := parseRoleList(u.Roles); err != nil {
			bad = append(bad, fmt.Errorf("%w: user %q: %w", ErrInvalidUser, u.ID, err))
			continue
		}
		want[u.ID] = &u
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.users
	next := make(map[string]*User, len(want))
	var changed []string
	for id, u := range want {
		if cur, ok := old[id]; ok && sameUser(cur, u) {
			next[id] = cur // unchanged: its cached logins stay
			continue
		}
		next[id] = u
		changed = append(changed, id)
	}
	for id := range old {
		if _, ok := want[id]; !ok {
			changed = append(changed, id)
		}
	}
	if len(changed) == 0 {
		s.awaiting.Store(false)
		return false, errors.Join(bad...)
	}
	s.users = next
	if err := s.saveLocked(); err != nil {
		s.users = old
		return false, err
	}
	for _, id := range changed {
		s.forgetLocked(id)
	}
	s.awaiting.Store(false)
	s.changedLocked()
	return true, errors.Join(bad...)
}

// sameUser reports whether a and b are the same record, as users.json
// would hold them.
func sameUser(a, b *User) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// DeleteUser removes user id.
func (s *Store) DeleteUser(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.users[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUserNotFound, id)
	}
	delete(s.users, id)
	s.forgetLocked(id)
	if err := s.saveLocked(); err != nil {
		s.users[id] = old
		return err
	}
	s.changedLocked()
	return nil
}

// DropBucketRoles removes from every user the roles on bucket (those that
// name it; [*] stays): a deleted bucket takes its roles with it, as
// Couchbase's do, so that users given a role on it reach nothing of a
// later bucket of the same name until given one on that. It reports how
// many users changed. A user left with no role keeps its password and
// reaches nothing.
func (s *Store) DropBucketRoles(bucket string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[string]*User{}
	for id, u := range s.users {
		kept, dropped := DropRoles(u.Roles, bucket)
		if !dropped {
			continue
		}
		nu := *u
		nu.Roles = kept
		old[id] = u
		s.users[id] = &nu
		s.forgetLocked(id)
	}
	if len(old) == 0 {
		return 0, nil
	}
	if err := s.saveLocked(); err != nil {
		for id, u := range old {
			s.users[id] = u
		}
		return 0, err
	}
	s.changedLocked()
	return len(old), nil
}

// DropRoles returns roles (as a User holds them) without those on bucket
// ([*] stays), and whether any was dropped: what DropBucketRoles does to
// each user, for a cluster's record of a user too.
func DropRoles(roles []string, bucket string) ([]string, bool) {
	kept := make([]string, 0, len(roles))
	for _, name := range roles {
		if r, err := ParseRole(name); err == nil && r.Bucket == bucket {
			continue
		}
		kept = append(kept, name)
	}
	return kept, len(kept) != len(roles)
}

// changedLocked marks a change of the users: Generation moves and
// Changed's channel closes.
// REQUIRES: s.mu.
func (s *Store) changedLocked() {
	s.gen.Add(1)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of the users
// (PutUser, DeleteUser, DropBucketRoles, ReplaceUsers): a long answer (a stream) waits on it to check its
// caller again with Lookup.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Generation counts the changes of the users: it moves whenever PutUser,
// DeleteUser, DropBucketRoles or ReplaceUsers changes one. A connection that authenticated once and keeps
// its Principal (the KV port) reads it before authenticating and, when it
// has moved since, looks its user up again (Lookup): a deleted user then
// loses its access, and changed roles apply, at its next command.
func (s *Store) Generation() uint64 { return s.gen.Load() }

// Lookup returns the current principal of user name (the administrator
// included), or ErrUserNotFound once it is deleted (ErrUsersPending for a
// stored user while the store awaits its users). It checks no password:
// it refreshes a principal authenticated before.
func (s *Store) Lookup(name string) (*Principal, error) {
	if s.held(name) {
		return nil, ErrUsersPending
	}
	s.mu.Lock()
	u := s.userLocked(name)
	s.mu.Unlock()
	if u == nil {
		return nil, fmt.Errorf("%w: %q", ErrUserNotFound, name)
	}
	return principalOf(u)
}

// Refresh returns the current principal of the user p was made for (by
// Authenticate, VerifyScram or an earlier Refresh), with its roles as they
// stand now, or ErrUserNotFound once that user is deleted, even when a
// user of the same name was created since (another Incarnation: its
// password and roles are not p's to use), and ErrUsersPending as Lookup's.
// It checks no password: a connection or stream that authenticated once
// calls it when Generation moves.
func (s *Store) Refresh(p *Principal) (*Principal, error) {
	cur, err := s.Lookup(p.Name)
	if err != nil {
		return nil, err
	}
	if cur.Incarnation != p.Incarnation {
		return nil, fmt.Errorf("%w: %q was deleted and created again", ErrUserNotFound, p.Name)
	}
	return cur, nil
}

// saveLocked writes users.json atomically: a 0600 temporary file in the same
// directory, fsynced, renamed over the old one, and the directory fsynced.
func (s *Store) saveLocked() error {
	f := usersFile{Version: usersFileVersion, Users: make([]User, 0, len(s.users))}
	for _, u := range s.users {
		f.Users = append(f.Users, *u)
	}
	sort.Slice(f.Users, func(i, j int) bool { return f.Users[i].ID < f.Users[j].ID })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, FileName+".tmp*")
	if err != nil {
		return fmt.Errorf("saving users: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("saving users: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("saving users: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving users: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving users: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("saving users: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
