package feed

import (
	"context"
	"fmt"
	"os"

	"github.com/mayflydb/mayfly/engine"
)

// Replaceable is a member that can be replaced staged.
type Replaceable interface {
	Member
	// PauseAcks stops (true) or resumes (false) acknowledging feed
	// positions (see Consumer.PauseAcks).
	PauseAcks(pause bool)
}

// Replacement says where a member's new definition lives and how it starts
// and is stored.
type Replacement[M any] struct {
	// Path is where the member's files live ("" in memory); a staged member
	// builds them at StagingPath(Path).
	Path string
	// Feed is the member's feed registration.
	Feed *engine.Consumer
	// RemoveFiles removes the member's files at Path: those an earlier
	// member left, before a member that replaces none starts, or a new
	// member's whose definition could not be stored.
	RemoveFiles func() error
	// Start starts the new member. staged says that it replaces a running
	// member: it builds its files at StagingPath(Path) while the running one
	// answers.
	Start func(staged bool) (M, error)
	// Store stores the new definition, once the new member runs.
	Store func() error
	// Promote moves a staged member's files to Path, where those of the
	// member it replaced were, once that one is closed.
	Promote func(m M) error
}

// Replace starts a new member id in set, in place of the running one if any,
// staged, the one replacement strategy of every kind of index: the old member
// answers while the new one starts and its definition is stored, and stops
// acknowledging feed positions meanwhile, so that the metadata purge waits
// for the new one; then the new member takes over, the old one closes and
// the new one's files move into place. If starting or storing fails, the old
// member goes on as it was and the new one leaves nothing behind. The caller
// holds the set's change lock (see Set.Change). replaced reports whether
// there was an old member.
func Replace[M Replaceable, X any](ctx context.Context, set *Set[M, X], id string, r Replacement[M]) (m M, replaced bool, err error) {
	opts := set.reg.opts
	warn := func(msg string, err error) {
		opts.Logger.Warn(opts.Kind+": "+msg, "bucket", set.Bucket.Name(), opts.LogKey, id, "err", err)
	}
	old, replaced, _ := set.Get(id)
	if replaced {
		old.PauseAcks(true)
	} else if err := r.RemoveFiles(); err != nil {
		warn("removing a leftover index", err)
	}
	m, err = r.Start(replaced)
	if err == nil {
		if err = r.Store(); err != nil {
			err = fmt.Errorf("%s: store %s: %w", opts.Kind, id, err)
			discard(ctx, m, replaced, r, warn)
		}
	}
	if err != nil {
		if replaced {
			old.PauseAcks(false)
		}
		var zero M
		return zero, replaced, err
	}
	set.Put(id, m)
	if replaced {
		if err := old.Close(); err != nil {
			warn("closing a replaced index", err)
		}
		if r.Path != "" {
			if err := r.Promote(m); err != nil {
				warn("moving a new index into place", err)
			}
		}
	}
	return m, replaced, nil
}

// discard undoes a new member whose definition could not be stored; what
// it cannot undo is logged through warn (the store's failure is the answer).
func discard[M Member](ctx context.Context, m M, staged bool, r Replacement[M], warn func(string, error)) {
	if err := m.Close(); err != nil {
		warn("closing an index whose definition was not stored", err)
	}
	if staged {
		if r.Path != "" {
			if err := os.RemoveAll(StagingPath(r.Path)); err != nil {
				warn("removing a staged index whose definition was not stored", err)
			}
		}
		return
	}
	if err := r.RemoveFiles(); err != nil {
		warn("removing an index whose definition was not stored", err)
	}
	if err := r.Feed.Drop(ctx); err != nil {
		warn("dropping the feed registration of an index whose definition was not stored", err)
	}
}
