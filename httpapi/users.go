package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
)

// userJSON is a user as Couchbase's GET /settings/rbac/users shows one.
type userJSON struct {
	ID     string     `json:"id"`
	Domain string     `json:"domain"`
	Name   string     `json:"name"`
	Roles  []roleJSON `json:"roles"`
	// PasswordChanged is RFC 3339, absent when unknown (a user stored
	// before Mayfly recorded it).
	PasswordChanged string `json:"password_change_date,omitempty"`
}

// roleJSON is one of a user's roles; Origins says it is given to the user
// directly (Mayfly has no groups).
type roleJSON struct {
	Role    string       `json:"role"`
	Bucket  string       `json:"bucket_name,omitempty"`
	Origins []originJSON `json:"origins,omitempty"` // not in /whoami, as Couchbase
}

type originJSON struct {
	Type string `json:"type"`
}

func userView(u auth.UserInfo) userJSON {
	out := userJSON{ID: u.ID, Domain: "local", Name: u.Name, Roles: []roleJSON{}}
	for _, r := range u.Roles {
		out.Roles = append(out.Roles, roleJSON{Role: r.Name, Bucket: r.Bucket, Origins: []originJSON{{Type: "user"}}})
	}
	if !u.PasswordChanged.IsZero() {
		out.PasswordChanged = u.PasswordChanged.UTC().Format(time.RFC3339)
	}
	return out
}

// roleDescJSON is a role as Couchbase's GET /settings/rbac/roles lists it:
// the bucket roles with bucket_name "*".
type roleDescJSON struct {
	Role   string `json:"role"`
	Bucket string `json:"bucket_name,omitempty"`
	Name   string `json:"name"`
	Desc   string `json:"desc"`
}

// listRoles handles GET /settings/rbac/roles.
func (s *server) listRoles(w http.ResponseWriter, r *http.Request) error {
	out := []roleDescJSON{}
	for _, d := range auth.Roles() {
		j := roleDescJSON{Role: d.Role, Name: d.DisplayName, Desc: d.Description}
		if d.TakesBucket {
			j.Bucket = "*"
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// classifyAuth maps the auth package's errors. A missing user's reason says
// "user was not found", as Couchbase's does: gocb matches it to ErrUserNotFound.
func classifyAuth(err error) *httpError {
	switch {
	case errors.Is(err, auth.ErrUserNotFound):
		return &httpError{http.StatusNotFound, "not_found", err.Error()}
	case errors.Is(err, auth.ErrInvalidUser), errors.Is(err, auth.ErrInvalidRole):
		return &httpError{http.StatusBadRequest, "bad_request", err.Error()}
	}
	return nil
}

// rolesOnBuckets refuses roles on buckets that do not exist, as Couchbase
// does: a role given before its bucket would read a bucket created later
// under that name, whoever meant it for (the role on a deleted bucket goes
// with it: auth.Store.DropBucketRoles). [*] names every bucket, now and
// later. A single node's buckets are its engine's; a cluster's are the
// cluster's definitions, which Options.Users checks in the write itself
// (a bucket just defined through another node may not be here yet, one
// being deleted still be).
func (s *server) rolesOnBuckets(roles []auth.Role) error {
	if _, single := s.users.(localUsers); !single {
		return nil
	}
	var missing []string
	for _, r := range roles {
		if r.Bucket == "" || r.Bucket == "*" {
			continue
		}
		if _, err := s.eng.Bucket(r.Bucket); err != nil {
			missing = append(missing, r.String())
		}
	}
	if len(missing) > 0 {
		return auth.RolesOnMissingBuckets(missing)
	}
	return nil
}

func (s *server) listUsers(w http.ResponseWriter, r *http.Request) error {
	out := []userJSON{}
	if s.sec.store != nil {
		for _, u := range s.sec.store.Users() {
			out = append(out, userView(u))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getUser(w http.ResponseWriter, r *http.Request) error {
	name, err := pathVar(r, "name")
	if err != nil {
		return err
	}
	u, err := s.sec.store.User(name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userView(u))
	return nil
}

// putUser handles PUT /settings/rbac/users/local/{name}: form (or JSON)
// password, roles (comma-separated), name. Without a password an existing
// user keeps theirs.
func (s *server) putUser(w http.ResponseWriter, r *http.Request) error {
	id, err := pathVar(r, "name")
	if err != nil {
		return err
	}
	vals, err := formParams(r)
	if err != nil {
		return err
	}
	roles, err := auth.ParseRoles(vals.Get("roles"))
	if err != nil {
		return err
	}
	if err := s.rolesOnBuckets(roles); err != nil {
		return err
	}
	var before any
	if old, err := s.sec.store.User(id); err == nil {
		before = userView(old)
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionUserPut, Target: id, Before: before,
		After: map[string]any{"name": vals.Get("name"), "roles": vals.Get("roles"), "password_changed": vals.Get("password") != ""}})
	if err != nil {
		return err
	}
	if err := s.users.PutUser(r.Context(), id, vals.Get("name"), vals.Get("password"), roles); err != nil {
		s.settle(r, in, err)
		return err
	}
	s.log.Info("user saved", "user", id, "roles", vals.Get("roles"), "by", principalOf(r).Name, "remote", r.RemoteAddr)
	u, err := s.sec.store.User(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userView(u))
	return nil
}

func (s *server) deleteUser(w http.ResponseWriter, r *http.Request) error {
	id, err := pathVar(r, "name")
	if err != nil {
		return err
	}
	var before any
	if old, err := s.sec.store.User(id); err == nil {
		before = userView(old)
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionUserDelete, Target: id, Before: before})
	if err != nil {
		return err
	}
	if err := s.users.DeleteUser(r.Context(), id); err != nil {
		s.settle(r, in, err)
		return err
	}
	s.log.Info("user deleted", "user", id, "by", principalOf(r).Name, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "deleted": "true"})
	return nil
}
