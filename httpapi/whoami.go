package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/mayflydb/mayfly/auth"
)

// maxCheckPermissionsBody bounds a checkPermissions request: a few hundred
// permissions.
const maxCheckPermissionsBody = 64 << 10

// whoami handles GET /whoami: the caller, in Couchbase's shape
// {"id","domain","name","roles":[{"role","bucket_name"}]}; domain is
// "admin" for the built-in administrator, "local" for a stored user. Any
// authenticated caller may ask. The web console reads it to say who is
// logged in.
func (s *server) whoami(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	out := userJSON{ID: p.Name, Domain: "admin", Name: p.Name, Roles: []roleJSON{}}
	if s.sec.store != nil {
		if u, err := s.sec.store.User(p.Name); err == nil {
			out.Domain, out.Name = "local", u.Name
		}
	}
	for _, role := range p.Roles {
		out.Roles = append(out.Roles, roleJSON{Role: role.Name, Bucket: role.Bucket})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkPermissions handles POST /pools/default/checkPermissions, as
// Couchbase does: the body is a comma-separated list of permissions in
// Couchbase's notation ("cluster.bucket[travel].data.docs!write,
// cluster.buckets!create"), the answer an object giving each one true or
// false for the caller. A permission that does not parse is a 400 naming it.
// Any authenticated caller may ask about themself. The web console hides
// the buttons whose action the user may not do.
func (s *server) checkPermissions(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckPermissionsBody))
	if err != nil {
		return err
	}
	p := principalOf(r)
	out := map[string]bool{}
	var bad []string
	for part := range strings.SplitSeq(string(body), ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			continue
		}
		perm, err := auth.ParsePermission(name)
		if errors.Is(err, auth.ErrInvalidPermission) {
			bad = append(bad, name)
			continue
		}
		out[name] = p.Allows(perm)
	}
	if len(bad) > 0 {
		return errBadRequest("malformed permissions: " + strings.Join(bad, ", "))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
