package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/auth"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// userSyncRetry is how often a UserSync tries again what failed (writing
// its users at start, applying the cluster's to its store).
const userSyncRetry = 2 * time.Second

// UserSync keeps a cluster node's users (its auth.Store, users.json) what
// the cluster's state holds (users.go), and changes the users there. At
// start it records the name of the node's administrator (PublishAdmin: no
// user of that name is written to the cluster from then on), writes in
// the node's own users that the cluster has no key for (SeedUsers: a
// tombstone wins over a local user), then mirrors the users' keys and
// applies them whole to the store at each change
// (auth.Store.ReplaceUsers). Until it has applied them once, the store's
// users (users.json's, perhaps stale: a user deleted or a password changed
// while the node was down) do not log in: they are refused with
// auth.ErrUsersPending, a temporary failure (auth.Store.AwaitUsers); the
// node's administrator does. It is safe for concurrent use.
type UserSync struct {
	cli    *clientv3.Client
	store  *auth.Store
	node   string
	logger *slog.Logger
	mirror *DefMirror

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	// applyMu serializes the applies.
	applyMu sync.Mutex
	warned  string // the apply failure last logged
	// shadowWarned is set once a user of the cluster named as this node's
	// administrator was logged.
	shadowWarned bool

	mu sync.Mutex
	// at: loaded once the cluster's users were applied; rev is the
	// highest ModRevision of the user keys applied (Version).
	at revisionGate
}

// StartUserSync starts keeping store, node's, what the cluster's users
// are, until Close. From now until its first apply the store's users do
// not log in (auth.Store.AwaitUsers): call it before the node serves.
func StartUserSync(cli *clientv3.Client, store *auth.Store, node string, logger *slog.Logger) *UserSync {
	ctx, cancel := context.WithCancel(context.Background())
	u := &UserSync{cli: cli, store: store, node: node, logger: logger, mirror: NewDefMirror(cli, Users),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), at: newRevisionGate()}
	store.AwaitUsers()
	u.wg.Go(u.run)
	return u
}

// Close stops applying the cluster's users.
func (u *UserSync) Close() {
	u.cancel()
	u.wg.Wait()
}

// run records this node's administrator's name and seeds the cluster
// with this node's users, then mirrors and applies the cluster's.
func (u *UserSync) run() {
	for {
		err := u.publishAdmin()
		if err == nil {
			break
		}
		if u.ctx.Err() != nil {
			return
		}
		u.logger.Warn("cluster: recording this node's administrator in the cluster's state; trying again", "err", err)
		sleepCtx(u.ctx, userSyncRetry)
	}
	for {
		rctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
		written, admins, err := SeedUsers(rctx, u.cli, u.store.Records())
		cancel()
		if len(admins) > 0 {
			u.logger.Error("cluster: this node's users named as a node's administrator are not written to the cluster's state (they would shadow it) and leave this node's users", "users", admins)
		}
		if err == nil {
			if len(written) > 0 {
				u.logger.Info("cluster: this node's users written to the cluster's state, which had none of theirs", "users", written)
			}
			break
		}
		if u.ctx.Err() != nil {
			return
		}
		u.logger.Warn("cluster: writing this node's users to the cluster's state; trying again", "err", err)
		sleepCtx(u.ctx, userSyncRetry)
	}
	u.wg.Go(func() {
		u.mirror.Run(u.ctx, func(string) {
			select {
			case u.kick <- struct{}{}:
			default:
			}
		})
	})
	t := time.NewTicker(userSyncRetry)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-u.ctx.Done():
			return
		case <-u.kick:
		case <-t.C:
			if !failed {
				continue
			}
		}
		failed = u.apply() != nil
	}
}

// publishAdmin records this node's administrator's name, and logs the
// other nodes' when they differ: a request one node forwards to another
// (a key another node leads) is authenticated there, so an administrator
// of one node's name only is refused there.
func (u *UserSync) publishAdmin() error {
	ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
	defer cancel()
	name := u.store.AdminName()
	if err := PublishAdmin(ctx, u.cli, u.node, name); err != nil {
		return err
	}
	admins, err := Admins(ctx, u.cli)
	if err != nil {
		return err
	}
	if name != "" && len(admins) > 1 {
		u.logger.Warn("cluster: the nodes' administrators have different names (mayfly serve --admin-user): a request a node forwards to another is refused there for another node's administrator; give every node the same administrator, as a Couchbase cluster has one",
			"this_node", name, "administrators", admins)
	}
	return nil
}

// apply makes the store what the mirror holds. A failure to write the
// store (users.json) changes nothing and is tried again; entries that
// cannot be read are left out (logged) and the rest applied.
func (u *UserSync) apply() error {
	u.applyMu.Lock()
	defer u.applyMu.Unlock()
	if !u.mirror.Loaded() {
		return nil
	}
	users, upTo, bad := LiveUsers(u.mirror.Bucket(UserDomain))
	if admin := u.store.AdminName(); admin != "" && !u.shadowWarned &&
		slices.ContainsFunc(users, func(x auth.User) bool { return x.ID == admin }) {
		// Written before this node's administrator was named so: left out
		// here (ReplaceUsers), a user of the other nodes.
		u.shadowWarned = true
		u.logger.Error("cluster: a user of the cluster is named as this node's administrator; this node leaves it out (its administrator stays): delete the user, or give this node's administrator another name", "user", admin)
	}
	changed, err := u.store.ReplaceUsers(users)
	if err != nil && !errors.Is(err, auth.ErrInvalidUser) {
		u.warn("cluster: applying the cluster's users; trying again", err)
		return err
	}
	if err = errors.Join(bad, err); err != nil {
		u.warn("cluster: users in the cluster's state that this node cannot apply, left out", err)
	} else {
		u.warned = ""
	}
	if changed {
		u.logger.Debug("cluster: applied the cluster's users", "users", len(users), "version", upTo)
	}
	u.mu.Lock()
	u.at.loaded = true
	u.at.moveLocked(max(upTo, 1)) // 1: loaded, whatever etcd holds
	u.mu.Unlock()
	return nil
}

// warn logs an apply failure once until it changes.
//
// REQUIRES: u.applyMu held.
func (u *UserSync) warn(msg string, err error) {
	if u.ctx.Err() == nil && u.warned != err.Error() {
		u.warned = err.Error()
		u.logger.Warn(msg, "err", err)
	}
}

// Version is the highest etcd revision among the changes of the users this
// node has applied (0 before it applied the cluster's users once): a node
// whose Version is at least v knows every change of the users up to v.
func (u *UserSync) Version() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.at.loaded {
		return 0
	}
	return u.at.rev
}

// WaitVersion waits until this node has applied the cluster's users up
// to version v (Version), or ctx ends.
func (u *UserSync) WaitVersion(ctx context.Context, v int64) error {
	return u.at.wait(ctx, &u.mu, v, "users")
}

// waitWrite waits until the write of a user at etcd revision rev is
// applied here (WaitApplied: at most ApplyWait): a read on this node
// right after sees it.
func (u *UserSync) waitWrite(ctx context.Context, rev int64) error {
	return WaitApplied(ctx, func(ctx context.Context) error { return u.WaitVersion(ctx, rev) })
}

// PutUser creates or replaces user id in the cluster's state, its password
// (if given) hashed here, and returns once this node applied it (every
// node applies it); auth's errors as auth.Store.PutUser's, and
// ErrUnavailable (engine.ErrTempFail) when the cluster's state could not
// be written within WriteTimeout (no quorum) or this node did not apply
// the write within ApplyWait.
func (u *UserSync) PutUser(ctx context.Context, id, name, password string, roles []auth.Role) error {
	c, err := u.store.PrepareUser(id, name, password, roles)
	if err != nil {
		return err
	}
	rev, err := PutUser(ctx, u.cli, c)
	if err != nil {
		return err
	}
	return u.waitWrite(ctx, rev)
}

// DeleteUser deletes user id from the cluster's state (a tombstone) and
// returns once this node removed it (every node removes it);
// auth.ErrUserNotFound when the cluster has no such user, ErrUnavailable
// as PutUser's.
func (u *UserSync) DeleteUser(ctx context.Context, id string) error {
	rev, err := DeleteUser(ctx, u.cli, id)
	if err != nil {
		return err
	}
	return u.waitWrite(ctx, rev)
}

// Sync waits until this node has applied every change of the users the
// cluster's state holds now (a node that deleted a bucket, whose roles left
// the users in the same transaction, waits so before answering).
func (u *UserSync) Sync(ctx context.Context) error {
	resp, err := u.cli.Get(ctx, defKey(Users, UserDomain, ""), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("cluster: reading the users: %w", err)
	}
	var v int64
	for _, kv := range resp.Kvs {
		v = max(v, kv.ModRevision)
	}
	return u.WaitVersion(ctx, v)
}
