package views

import (
	"context"

	"github.com/mayflydb/mayfly/jsruntime"
)

// reducer adapts a jsruntime.Reducer to index.Reducer. index.Reducer has no
// context parameter, and the index calls it both to store reductions while
// indexing and to reduce partial ranges while answering a query, so a call
// runs under the indexer's lifetime (ctx ends when the design document is
// replaced or deleted, its bucket detached or the service closed) and the
// pool's time limit per call. A query's own context is checked between the
// rows it returns (see Query.Run); a JavaScript reduce cannot yet be
// interrupted by it without a context-aware index.Reducer.
type reducer struct {
	r   jsruntime.Reducer
	ctx context.Context
}

func (a reducer) Reduce(keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	return a.r.Reduce(a.ctx, keys, ids, values)
}

func (a reducer) Rereduce(values [][]byte) ([]byte, error) {
	return a.r.Rereduce(a.ctx, values)
}
