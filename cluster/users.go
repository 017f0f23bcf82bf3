package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mayflydb/mayfly/auth"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The cluster's users. On a cluster the users and their roles are the
// cluster's, as Couchbase's are: one key per user, /mayfly/users/local/ID
// (a Users definition of "bucket" UserDomain), holding a UserEntry: the
// user as users.json holds it (name, roles, password hashes and SCRAM
// credentials, never a password), or a tombstone once deleted. Every node
// makes its own auth.Store what these keys hold (auth.Store.ReplaceUsers).
// A tombstone stays, so that a node that was down when the user was
// deleted does not write its own copy back (SeedUsers writes only users
// the cluster has no key for). Each node's built-in administrator
// (--admin-user, --admin-password) is its own and never written here;
// its name is: /mayfly/admins/NAME/NODE (PublishAdmin), and no user of a
// name a node's administrator has is written (PutUser, SeedUsers), so
// that no node's administrator is shadowed by a user of the cluster.

// UserDomain is the one domain of Mayfly's users ("local", Couchbase's
// domain of the users it stores itself): the "bucket" of a Users Def.
const UserDomain = "local"

// UserEntry is one user's key: the user, or Deleted.
type UserEntry struct {
	// User is the user as users.json holds it; nil when Deleted.
	User *auth.User `json:"user,omitempty"`
	// Deleted marks a deleted user.
	Deleted bool `json:"deleted,omitempty"`
}

// ParseUserEntry decodes a user's entry (a Users Def's Value).
func ParseUserEntry(value []byte) (UserEntry, error) {
	var e UserEntry
	if err := json.Unmarshal(value, &e); err != nil {
		return UserEntry{}, fmt.Errorf("cluster: a user's entry: %w", err)
	}
	if !e.Deleted && e.User == nil {
		return UserEntry{}, errors.New("cluster: a user's entry holds neither a user nor a tombstone")
	}
	return e, nil
}

// userKey is the key of user id.
func userKey(id string) string { return defKey(Users, UserDomain, id) }

// adminNamePrefix is the prefix of the keys of the nodes whose
// administrator is named name (names hold no '/': auth's rule).
func adminNamePrefix(name string) string { return adminsPrefix + name + "/" }

// adminFree is the condition that no node's administrator is named name.
func adminFree(name string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(adminNamePrefix(name)), "=", 0).WithPrefix()
}

// PublishAdmin records that node's built-in administrator is named name
// ("" for none: a node without an administrator password), replacing
// what node recorded before (a node restarted with another --admin-user
// frees its old name). The record stays while the node is down: a user of
// the name is refused until the node records another.
func PublishAdmin(ctx context.Context, cli *clientv3.Client, node, name string) error {
	resp, err := cli.Get(ctx, adminsPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("cluster: reading the administrators' names: %w", err)
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		n, nd, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), adminsPrefix), "/")
		if ok && nd == node && n != name {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	if name != "" {
		ops = append(ops, clientv3.OpPut(adminNamePrefix(name)+node, ""))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("cluster: recording this node's administrator: %w", err)
	}
	return nil
}

// Admins returns the administrators' names the nodes recorded
// (PublishAdmin), each with the nodes that have it.
func Admins(ctx context.Context, cli *clientv3.Client) (map[string][]string, error) {
	resp, err := cli.Get(ctx, adminsPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the administrators' names: %w", err)
	}
	out := map[string][]string{}
	for _, kv := range resp.Kvs {
		if n, nd, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), adminsPrefix), "/"); ok {
			out[n] = append(out[n], nd)
		}
	}
	return out, nil
}

// PutUser applies change c to the user the cluster's state holds (none
// when it holds a tombstone) and writes the result, in a transaction
// conditioned on the entry read (a writer that lost the race applies its
// change to the winner's), on no node's administrator having the user's
// name (auth.ErrInvalidUser otherwise) and on every bucket c's roles name
// being defined (auth.RolesOnMissingBuckets otherwise: the cluster's
// buckets, not one node's copies; a bucket deleted in the same moment
// either refuses the write or, its deletion conditioned on the users
// unchanged, takes the role with it). It returns the etcd revision of the
// write. c's errors (a new user without a password) are returned as they
// are, nothing written; a write etcd did not take within WriteTimeout is
// ErrUnavailable (Unavailable).
func PutUser(ctx context.Context, cli *clientv3.Client, c *auth.UserChange) (rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		rev, err = updateUser(ctx, cli, c.ID(), c, func(cur *auth.User) (UserEntry, error) {
			u, err := c.Apply(cur)
			if err != nil {
				return UserEntry{}, err
			}
			return UserEntry{User: u}, nil
		})
		return err
	})
	return rev, err
}

// DeleteUser replaces user id with a tombstone and returns the etcd
// revision of the write; auth.ErrUserNotFound when the cluster has no
// such user, ErrUnavailable as PutUser's.
func DeleteUser(ctx context.Context, cli *clientv3.Client, id string) (rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		rev, err = updateUser(ctx, cli, id, nil, func(cur *auth.User) (UserEntry, error) {
			if cur == nil {
				return UserEntry{}, fmt.Errorf("%w: %q", auth.ErrUserNotFound, id)
			}
			return UserEntry{Deleted: true}, nil
		})
		return err
	})
	return rev, err
}

// updateUser writes next(the user etcd holds, nil for none) as user id's
// entry, conditioned on the entry read and, for a change c (nil for a
// deletion), on PutUser's conditions, reading again when another write
// came between.
func updateUser(ctx context.Context, cli *clientv3.Client, id string, c *auth.UserChange, next func(cur *auth.User) (UserEntry, error)) (int64, error) {
	key := userKey(id)
	var buckets []string
	if c != nil {
		buckets = c.Buckets()
	}
	for {
		// The entry, the administrators of its name and the buckets its
		// roles name, read at one revision.
		reads := []clientv3.Op{clientv3.OpGet(key)}
		if c != nil {
			reads = append(reads, clientv3.OpGet(adminNamePrefix(id), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
			for _, b := range buckets {
				reads = append(reads, clientv3.OpGet(bucketsPrefix+b, clientv3.WithKeysOnly()))
			}
		}
		resp, err := cli.Txn(ctx).Then(reads...).Commit()
		if err != nil {
			return 0, fmt.Errorf("cluster: reading user %q: %w", id, err)
		}
		var cur *auth.User
		var modRev int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			e, err := ParseUserEntry(kvs[0].Value)
			if err != nil {
				return 0, fmt.Errorf("user %q: %w", id, err)
			}
			cur, modRev = e.User, kvs[0].ModRevision
		}
		conds := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)}
		if c != nil {
			if err := checkUserWrite(id, c, buckets, resp.Responses[1:]); err != nil {
				return 0, err
			}
			conds = append(conds, adminFree(id))
			for _, b := range buckets {
				conds = append(conds, clientv3.Compare(clientv3.CreateRevision(bucketsPrefix+b), ">", 0))
			}
		}
		e, err := next(cur)
		if err != nil {
			return 0, err
		}
		data, err := json.Marshal(e)
		if err != nil {
			return 0, err
		}
		tr, err := cli.Txn(ctx).If(conds...).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return 0, fmt.Errorf("cluster: writing user %q: %w", id, err)
		}
		if tr.Succeeded {
			return tr.Header.Revision, nil
		}
	}
}

// checkUserWrite refuses change c of user id when a node's administrator
// has its name (admin: the read of adminNamePrefix(id)) or a bucket its
// roles name is not defined (defined: the reads of buckets' keys, in
// order).
func checkUserWrite(id string, c *auth.UserChange, buckets []string, reads []*etcdserverpb.ResponseOp) error {
	if kvs := reads[0].GetResponseRange().Kvs; len(kvs) > 0 {
		node := strings.TrimPrefix(string(kvs[0].Key), adminNamePrefix(id))
		return fmt.Errorf("%w: %q is the built-in administrator of node %s (set by its mayfly serve --admin-user/--admin-password)", auth.ErrInvalidUser, id, node)
	}
	missing := map[string]bool{}
	for i, b := range buckets {
		if len(reads[1+i].GetResponseRange().Kvs) == 0 {
			missing[b] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var roles []string
	for _, name := range c.Roles() {
		if r, err := auth.ParseRole(name); err == nil && missing[r.Bucket] {
			roles = append(roles, name)
		}
	}
	return auth.RolesOnMissingBuckets(roles)
}

// SeedUsers writes each of users that the cluster's state has no key for
// (neither a user nor a tombstone), each in a transaction conditioned on
// its key's absence: a node joining a cluster, or one upgraded from a
// version whose users were each node's own, keeps the users it has, and
// one deleted from the cluster meanwhile stays deleted. A user named as
// a node's administrator (PublishAdmin) is not written: it would shadow
// that administrator. It returns the users written, and those left out
// for an administrator's name.
func SeedUsers(ctx context.Context, cli *clientv3.Client, users []auth.User) (written, admins []string, err error) {
	for i := range users {
		u := &users[i]
		data, err := json.Marshal(UserEntry{User: u})
		if err != nil {
			return written, admins, err
		}
		key := userKey(u.ID)
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), adminFree(u.ID)).
			Then(clientv3.OpPut(key, string(data))).
			Else(clientv3.OpGet(adminNamePrefix(u.ID), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))).Commit()
		if err != nil {
			return written, admins, fmt.Errorf("cluster: writing user %q: %w", u.ID, err)
		}
		switch {
		case tr.Succeeded:
			written = append(written, u.ID)
		case len(tr.Responses[0].GetResponseRange().Kvs) > 0:
			admins = append(admins, u.ID)
		}
	}
	return written, admins, nil
}

// LiveUsers returns the users a mirror of the Users definitions holds
// (defs: its Bucket(UserDomain)), tombstones left out, and the highest
// ModRevision among all of them, tombstones included: a node that applied
// them has seen every change of the users up to that revision. An entry
// that cannot be read is left out and reported in the error, the others
// returned.
func LiveUsers(defs []Def) (users []auth.User, upTo int64, err error) {
	var bad []error
	for _, d := range defs {
		upTo = max(upTo, d.ModRevision)
		e, err := ParseUserEntry(d.Value)
		switch {
		case err != nil:
			bad = append(bad, fmt.Errorf("user %q: %w", d.Name, err))
		case e.Deleted:
		case e.User.ID != d.Name:
			bad = append(bad, fmt.Errorf("cluster: the entry of user %q holds user %q", d.Name, e.User.ID))
		default:
			users = append(users, *e.User)
		}
	}
	return users, upTo, errors.Join(bad...)
}

// dropBucketRoles returns the writes that take bucket's roles from the
// cluster's users (auth.DropRoles: [*] stays), and the condition that no
// user changed since they were read: DeleteBucket makes them in the
// transaction that deletes the bucket, so that they are made once, with
// the deletion, and not by each node deleting its copy (a node deleting
// it late would take roles given on a bucket created again since).
func dropBucketRoles(ctx context.Context, cli *clientv3.Client, bucket string) (clientv3.Cmp, []clientv3.Op, error) {
	prefix := defKey(Users, UserDomain, "")
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return clientv3.Cmp{}, nil, fmt.Errorf("cluster: reading the users: %w", err)
	}
	unchanged := clientv3.Compare(clientv3.ModRevision(prefix), "<", resp.Header.Revision+1).WithPrefix()
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		op, ok, err := dropRolesOp(kv, bucket)
		if err != nil {
			return clientv3.Cmp{}, nil, err
		}
		if ok {
			ops = append(ops, op)
		}
	}
	return unchanged, ops, nil
}

// dropRolesOp is the write of kv's user without its roles on bucket;
// false when it has none (or is a tombstone).
func dropRolesOp(kv *mvccpb.KeyValue, bucket string) (clientv3.Op, bool, error) {
	e, err := ParseUserEntry(kv.Value)
	if err != nil {
		return clientv3.Op{}, false, fmt.Errorf("%s: %w", kv.Key, err)
	}
	if e.Deleted {
		return clientv3.Op{}, false, nil
	}
	kept, dropped := auth.DropRoles(e.User.Roles, bucket)
	if !dropped {
		return clientv3.Op{}, false, nil
	}
	u := *e.User
	u.Roles = kept
	data, err := json.Marshal(UserEntry{User: &u})
	if err != nil {
		return clientv3.Op{}, false, err
	}
	return clientv3.OpPut(string(kv.Key), string(data)), true, nil
}
