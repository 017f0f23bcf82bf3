package views

import (
	"context"

	"github.com/mayflydb/mayfly/jsruntime"
)

// reducer adapts a jsruntime.Reducer to index.Reducer. The index computes
// stored reductions outside any one query, so calls run under the pool's own
// time limit rather than a request's context.
type reducer struct{ r jsruntime.Reducer }

func (a reducer) Reduce(keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	return a.r.Reduce(context.Background(), keys, ids, values)
}

func (a reducer) Rereduce(values [][]byte) ([]byte, error) {
	return a.r.Rereduce(context.Background(), values)
}
