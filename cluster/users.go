package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mayflydb/mayfly/auth"
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
// (--admin-user, --admin-password) is its own and never written here.

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

// PutUser applies change c to the user the cluster's state holds (none
// when it holds a tombstone) and writes the result, in a transaction
// conditioned on the entry read (a writer that lost the race applies its
// change to the winner's). It returns the etcd revision of the write. c's
// errors (a new user without a password) are returned as they are,
// nothing written; a write etcd did not take within WriteTimeout is
// ErrUnavailable (Unavailable).
func PutUser(ctx context.Context, cli *clientv3.Client, c *auth.UserChange) (rev int64, err error) {
	err = bounded(ctx, func(ctx context.Context) error {
		var err error
		rev, err = updateUser(ctx, cli, c.ID(), func(cur *auth.User) (UserEntry, error) {
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
		rev, err = updateUser(ctx, cli, id, func(cur *auth.User) (UserEntry, error) {
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
// entry, conditioned on the entry read, reading again when another write
// came between.
func updateUser(ctx context.Context, cli *clientv3.Client, id string, next func(cur *auth.User) (UserEntry, error)) (int64, error) {
	key := userKey(id)
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("cluster: reading user %q: %w", id, err)
		}
		var cur *auth.User
		var modRev int64
		if len(resp.Kvs) > 0 {
			e, err := ParseUserEntry(resp.Kvs[0].Value)
			if err != nil {
				return 0, fmt.Errorf("user %q: %w", id, err)
			}
			cur, modRev = e.User, resp.Kvs[0].ModRevision
		}
		e, err := next(cur)
		if err != nil {
			return 0, err
		}
		data, err := json.Marshal(e)
		if err != nil {
			return 0, err
		}
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return 0, fmt.Errorf("cluster: writing user %q: %w", id, err)
		}
		if tr.Succeeded {
			return tr.Header.Revision, nil
		}
	}
}

// SeedUsers writes each of users that the cluster's state has no key for
// (neither a user nor a tombstone), each in a transaction conditioned on
// its key's absence: a node joining a cluster, or one upgraded from a
// version whose users were each node's own, keeps the users it has, and
// one deleted from the cluster meanwhile stays deleted. It returns the
// users written.
func SeedUsers(ctx context.Context, cli *clientv3.Client, users []auth.User) ([]string, error) {
	var written []string
	for i := range users {
		u := &users[i]
		data, err := json.Marshal(UserEntry{User: u})
		if err != nil {
			return written, err
		}
		key := userKey(u.ID)
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		if err != nil {
			return written, fmt.Errorf("cluster: writing user %q: %w", u.ID, err)
		}
		if tr.Succeeded {
			written = append(written, u.ID)
		}
	}
	return written, nil
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
