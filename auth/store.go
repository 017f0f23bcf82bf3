package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// FileName is the users file in the data directory.
const FileName = "users.json"

// Errors of the Store.
var (
	ErrBadCredentials = errors.New("wrong user name or password")
	ErrUserNotFound   = errors.New("no such user")
	ErrInvalidUser    = errors.New("invalid user")
)

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
}

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
}

// Store holds the users. It is safe for concurrent use.
type Store struct {
	path   string
	params Argon2Params
	admin  *User // nil without an administrator password
	// hashSlots bounds concurrent argon2 computations (each takes Memory KiB).
	hashSlots chan struct{}
	cacheKey  [32]byte // random per process; keys the verification cache
	dummy     Credential

	mu    sync.Mutex
	users map[string]*User
	// verified caches successful verifications: user → HMAC(cacheKey,
	// password), so each request does not pay argon2. Dropped on any change
	// of the user.
	verified map[string][32]byte
}

// Open loads dir/users.json (none yet is no users).
func Open(dir string, opts *Options) (*Store, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	s := &Store{
		path:      filepath.Join(dir, FileName),
		params:    DefaultArgon2,
		hashSlots: make(chan struct{}, max(1, runtime.NumCPU())),
		users:     map[string]*User{},
		verified:  map[string][32]byte{},
	}
	if o.Argon2 != nil {
		s.params = *o.Argon2
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
			Credentials: map[string]Credential{CredArgon2id: s.hash(o.AdminPassword)}}
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
	defer func() { <-s.hashSlots }()
	return argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
}

// verify checks password against an argon2id credential.
func (s *Store) verify(c Credential, password string) bool {
	if c.Argon2 == nil || len(c.Hash) == 0 || c.Argon2.KeyLen != uint32(len(c.Hash)) {
		return false
	}
	got := s.argon2(*c.Argon2, password, c.Salt)
	return subtle.ConstantTimeCompare(got, c.Hash) == 1
}

func (s *Store) mac(password string) [32]byte {
	m := hmac.New(sha256.New, s.cacheKey[:])
	m.Write([]byte(password))
	var out [32]byte
	copy(out[:], m.Sum(nil))
	return out
}

// Authenticate returns the user name and password's principal, or
// ErrBadCredentials (for an unknown user too, after the same work).
func (s *Store) Authenticate(name, password string) (*Principal, error) {
	s.mu.Lock()
	u := s.users[name]
	if s.admin != nil && name == s.admin.ID {
		u = s.admin
	}
	cached, hit := s.verified[name]
	s.mu.Unlock()
	if u == nil {
		s.verify(s.dummy, password) // the same cost as a known user
		return nil, ErrBadCredentials
	}
	mac := s.mac(password)
	if !(hit && hmac.Equal(cached[:], mac[:])) {
		if !s.verify(u.Credentials[CredArgon2id], password) {
			return nil, ErrBadCredentials
		}
		s.mu.Lock()
		// Cache only if the user was not changed meanwhile.
		if cur := s.users[name]; cur == u || u == s.admin {
			s.verified[name] = mac
		}
		s.mu.Unlock()
	}
	roles, err := parseRoleList(u.Roles)
	if err != nil {
		return nil, err
	}
	return &Principal{Name: name, Roles: roles}, nil
}

// UserInfo is a user as the REST API shows it: no credentials.
type UserInfo struct {
	ID    string
	Name  string
	Roles []Role
}

func info(u *User) UserInfo {
	roles, _ := parseRoleList(u.Roles)
	return UserInfo{ID: u.ID, Name: u.Name, Roles: roles}
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
	case len(id) > 128:
		return fmt.Errorf("%w: the user name is over 128 bytes", ErrInvalidUser)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: the user name is not UTF-8", ErrInvalidUser)
	case strings.ContainsAny(id, "()<>@,;:\\\"/[]?={} \t\r\n"):
		return fmt.Errorf("%w: the user name holds a character Couchbase forbids: ()<>@,;:\\\"/[]?={} or a space", ErrInvalidUser)
	}
	return nil
}

// PutUser creates or replaces user id. password "" keeps an existing user's
// password (a new user needs one); roles replace the old ones.
func (s *Store) PutUser(id, name, password string, roles []Role) error {
	if err := validName(id); err != nil {
		return err
	}
	if s.admin != nil && id == s.admin.ID {
		return fmt.Errorf("%w: %q is the built-in administrator (set by mayfly serve --admin-user/--admin-password)", ErrInvalidUser, id)
	}
	if password != "" && len(password) < 6 {
		return fmt.Errorf("%w: the password must be at least 6 characters", ErrInvalidUser)
	}
	if len(password) > 1024 {
		return fmt.Errorf("%w: the password is over 1024 bytes", ErrInvalidUser)
	}
	var cred Credential
	if password != "" {
		cred = s.hash(password)
	}
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = r.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.users[id]
	u := &User{ID: id, Name: name, Roles: names, Credentials: map[string]Credential{}}
	if old != nil {
		for k, c := range old.Credentials {
			u.Credentials[k] = c
		}
	}
	if password != "" {
		u.Credentials[CredArgon2id] = cred
	} else if old == nil {
		return fmt.Errorf("%w: a new user needs a password", ErrInvalidUser)
	}
	s.users[id] = u
	delete(s.verified, id)
	if err := s.saveLocked(); err != nil {
		if old != nil {
			s.users[id] = old
		} else {
			delete(s.users, id)
		}
		return err
	}
	return nil
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
	delete(s.verified, id)
	if err := s.saveLocked(); err != nil {
		s.users[id] = old
		return err
	}
	return nil
}

// saveLocked writes users.json atomically: a 0600 temporary file in the same
// directory, fsynced, renamed over the old one, and the directory fsynced.
func (s *Store) saveLocked() error {
	f := usersFile{Version: 1, Users: make([]User, 0, len(s.users))}
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
