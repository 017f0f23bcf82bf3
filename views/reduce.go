package views

import (
	"context"

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
