package views

import (
	"context"
	"sync"

	"github.com/mayflydb/mayfly/jsruntime"
)

// reducer adapts a jsruntime.Reducer to index.Reducer. A call runs under the
// context the index passes (the query's, so a client that hangs up stops a
// long JavaScript reduce) and the pool's time limit per call, and is refused
// once the indexer's life (ctx) has ended: its design document was replaced
// or deleted, its bucket detached or the service closed.
type reducer struct {
	r   jsruntime.Reducer
	ctx context.Context
}

// Reduce implements index.Reducer.
func (a reducer) Reduce(ctx context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	if err := a.ctx.Err(); err != nil {
		return nil, err
	}
	return a.r.Reduce(ctx, keys, ids, values)
}

// Rereduce implements index.Reducer.
func (a reducer) Rereduce(ctx context.Context, values [][]byte) ([]byte, error) {
	if err := a.ctx.Err(); err != nil {
		return nil, err
	}
	return a.r.Rereduce(ctx, values)
}

// reduceHistory remembers which views of an index have answered a reduce
// query without error. Couchbase computes reductions while it builds and
// updates an index, so a bad value fails the initial build ("Error building
// index") or a later update ("Error updating index"); Mayfly computes them
// when a query first needs them, and says "building" until the view has
// once reduced without error, "updating" afterwards. The zero value is
// ready; it is safe for concurrent use.
type reduceHistory struct {
	ok sync.Map // view name → struct{}
}

// succeeded records a reduce query of view that answered without error.
func (h *reduceHistory) succeeded(view string) { h.ok.LoadOrStore(view, struct{}{}) }

// updating says whether view has answered a reduce query before.
func (h *reduceHistory) updating(view string) bool {
	_, ok := h.ok.Load(view)
	return ok
}
