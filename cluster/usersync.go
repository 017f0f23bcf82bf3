package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// start it writes in the node's own users that the cluster has no key for
// (SeedUsers: a tombstone wins over a local user), then mirrors the users'
// keys and applies them whole to the store at each change
// (auth.Store.ReplaceUsers). Until it has applied them once the store
// holds the node's own users, as before. It is safe for concurrent use.
type UserSync struct {
	cli    *clientv3.Client
	store  *auth.Store
	logger *slog.Logger
	mirror *DefMirror

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	// applyMu serializes the applies.
	applyMu sync.Mutex
	warned  string // the apply failure last logged

	mu sync.Mutex
	// at: loaded once the cluster's users were applied; rev is the
	// highest ModRevision of the user keys applied (Version).
	at revisionGate
}

// StartUserSync starts keeping store what the cluster's users are, until
// Close.
func StartUserSync(cli *clientv3.Client, store *auth.Store, logger *slog.Logger) *UserSync {
	ctx, cancel := context.WithCancel(context.Background())
	u := &UserSync{cli: cli, store: store, logger: logger, mirror: NewDefMirror(cli, Users),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), at: newRevisionGate()}
	u.wg.Go(u.run)
	return u
}

// Close stops applying the cluster's users.
func (u *UserSync) Close() {
	u.cancel()
	u.wg.Wait()
}

// run seeds the cluster with this node's users, then mirrors and applies
// the cluster's.
func (u *UserSync) run() {
	for {
		rctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
		written, err := SeedUsers(rctx, u.cli, u.store.Records())
		cancel()
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
