package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
)

// A long answer (a continuous change feed, a streamed bucket
// configuration) ends when its caller's user is deleted or loses the
// permission it needed, as a KV connection's user is looked up again:
// else a deleted data_dcp_reader keeps receiving every change of the
// bucket for as long as it keeps the connection open.
func TestStreamsEndWhenTheUserIsRevoked(t *testing.T) {
	for _, tc := range []struct {
		name, roles, path string
		revoke            func(f *fixture, user string) error
	}{
		{"changes, user deleted", "data_dcp_reader[default]", "/default/_changes?feed=continuous&heartbeat=60000",
			func(f *fixture, user string) error { return f.users.DeleteUser(user) }},
		{"changes, role taken away", "data_dcp_reader[default]", "/default/_changes?feed=continuous&heartbeat=60000",
			func(f *fixture, user string) error {
				return f.users.PutUser(user, "", "", mustRoles(t, "data_reader[default]"))
			}},
		{"bucket stream, user deleted", "data_reader[default]", "/pools/default/bs/default",
			func(f *fixture, user string) error { return f.users.DeleteUser(user) }},
		// Deleted and created again with the same roles, in one change of
		// the users (as a cluster node may apply the two): the new user is
		// not the stream's. (A review found the stream's user was looked up
		// by name only, so the stream went on.)
		{"changes, user deleted and created again", "data_dcp_reader[default]", "/default/_changes?feed=continuous&heartbeat=60000",
			func(f *fixture, user string) error {
				again, err := auth.Open(t.TempDir(), &auth.Options{Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
				if err != nil {
					return err
				}
				if err := again.PutUser(user, "", "u-password", mustRoles(t, "data_dcp_reader[default]")); err != nil {
					return err
				}
				_, err = f.users.ReplaceUsers(again.Records())
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if err := f.users.PutUser("u", "", "u-password", mustRoles(t, tc.roles)); err != nil {
				t.Fatal(err)
			}
			if st, _, body := f.do("PUT", "/default/docs/a", "", `{}`); st != 201 {
				t.Fatalf("PUT: %d %s", st, body)
			}
			// Only on the old code does the stream outlive this.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth("u", "u-password")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			lines := bufio.NewReader(resp.Body)
			if _, err := lines.ReadString('\n'); err != nil {
				t.Fatalf("first line: %v", err)
			}
			if err := tc.revoke(f, "u"); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, lines); err != nil {
				t.Fatalf("the stream did not end when the user lost its access: %v", err)
			}
		})
	}
}

func mustRoles(t *testing.T, s string) []auth.Role {
	t.Helper()
	r, err := auth.ParseRoles(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
