package engine

import "sync"

// settingsWatchers are the functions told of a bucket's settings changes.
type settingsWatchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(old, updated BucketSettings)
}

// WatchSettings asks that fn be called after every change of b's settings
// (UpdateSettings), with the settings before and after, once the change is
// persisted. Calls come one at a time, in the order of the changes, before
// UpdateSettings returns; fn must not change b's definition itself. Services
// that derive state from the settings (the pager's schedule) follow them this
// way instead of keeping a second copy. stop ends the watch; after it
// returns, fn is not called again.
func (b *Bucket) WatchSettings(fn func(old, updated BucketSettings)) (stop func()) {
	w := &b.watchers
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = make(map[int]func(old, updated BucketSettings))
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// settingsChanged calls the watchers of b's settings.
//
// REQUIRES: b.ddl held, so that changes are told in order.
func (b *Bucket) settingsChanged(old, updated BucketSettings) {
	w := &b.watchers
	// Hold w.mu across the calls, so that a watch stopped is never called
	// afterwards; watchers do not call back into WatchSettings.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fn := range w.fns {
		fn(old, updated)
	}
}
