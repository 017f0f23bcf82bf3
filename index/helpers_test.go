package index_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// countSum reduces to [row count, sum of values]; values must be integers, so
// sums are exact in any order. It counts its calls.
type countSum struct {
	reduces, rereduces atomic.Int64
}

func (c *countSum) Reduce(_ context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	c.reduces.Add(1)
	var sum int64
	for _, v := range values {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("countSum: value %s is not an integer", v)
		}
		sum += n
	}
	return countSumJSON(int64(len(values)), sum), nil
}

func (c *countSum) Rereduce(_ context.Context, values [][]byte) ([]byte, error) {
	c.rereduces.Add(1)
	var count, sum int64
	for _, v := range values {
		n, s, err := parseCountSum(v)
		if err != nil {
			return nil, err
		}
		count += n
		sum += s
	}
	return countSumJSON(count, sum), nil
}

func countSumJSON(count, sum int64) []byte {
	return []byte("[" + strconv.FormatInt(count, 10) + "," + strconv.FormatInt(sum, 10) + "]")
}

func parseCountSum(v []byte) (count, sum int64, err error) {
	a, b, ok := strings.Cut(strings.Trim(string(v), "[]"), ",")
	if !ok {
		return 0, 0, fmt.Errorf("countSum: bad reduction %s", v)
	}
	if count, err = strconv.ParseInt(a, 10, 64); err == nil {
		sum, err = strconv.ParseInt(b, 10, 64)
	}
	return count, sum, err
}

// emits builds one view's rows from alternating key and value JSON.
func emits(kv ...string) []index.Emit {
	var out []index.Emit
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, index.Emit{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return out
}

// openIndex opens an index (with 4 partitions unless cfg says otherwise) that
// the test's cleanup checks with Check and closes. A test that closes it
// itself should do so with closeIndex, which checks it first.
func openIndex(t testing.TB, cfg index.Config) *index.Index {
	t.Helper()
	if cfg.NumPartitions == 0 {
		cfg.NumPartitions = 4
	}
	ix, err := index.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := ix.Check(context.Background()); err != nil && !errors.Is(err, index.ErrClosed) {
			t.Errorf("Check at cleanup: %v", err)
		}
		if err := ix.Close(); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	return ix
}

// checkIndex fails the test if Check finds a violation.
func checkIndex(t testing.TB, ix *index.Index) {
	t.Helper()
	if err := ix.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// closeIndex checks the index, then closes it.
func closeIndex(t testing.TB, ix *index.Index) {
	t.Helper()
	checkIndex(t, ix)
	if err := ix.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func apply(t testing.TB, ix *index.Index, updates ...index.DocUpdate) {
	t.Helper()
	if err := ix.Apply(context.Background(), updates); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// rowsOf returns the rows of a query as "key id value" strings.
func rowsOf(t testing.TB, ix *index.Index, view string, r index.Range) []string {
	t.Helper()
	var out []string
	err := ix.Query(context.Background(), view, r, func(row index.Row) error {
		out = append(out, fmt.Sprintf("%s %s %s", row.Key, row.DocID, row.Value))
		return nil
	})
	if err != nil {
		t.Fatalf("Query(%+v): %v", r, err)
	}
	return out
}

// reduced returns the rows of a reduce as "key value" strings.
func reduced(t testing.TB, ix *index.Index, view string, r index.Range, g index.Grouping) []string {
	t.Helper()
	var out []string
	err := ix.Reduce(context.Background(), view, r, g, func(k, v []byte) error {
		out = append(out, fmt.Sprintf("%s %s", k, v))
		return nil
	})
	if err != nil {
		t.Fatalf("Reduce(%+v, %+v): %v", r, g, err)
	}
	return out
}

func equalStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

func js(s string) []byte { return []byte(s) }
