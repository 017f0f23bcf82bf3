package index

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// checkTree verifies the B+tree invariants of the subtree n whose rows lie in
// [lo, hi): rows ordered, separators bounding their children, counts exact, no
// node other than the root underfull or overfull. It returns the rows' keys.
func checkTree(t *testing.T, n *node, lo, hi []byte, isRoot bool) [][]byte {
	t.Helper()
	if !isRoot && n.size() < n.capacity(maxItems)/4 {
		t.Fatalf("node with %d entries is underfull", n.size())
	}
	if n.size() > n.capacity(maxItems) {
		t.Fatalf("node with %d entries is overfull", n.size())
	}
	var keys [][]byte
	if n.leaf() {
		for i := range n.items {
			k := n.items[i].ck()
			if lo != nil && bytes.Compare(k, lo) < 0 || hi != nil && bytes.Compare(k, hi) >= 0 {
				t.Fatalf("row %q outside its node's range [%q, %q)", k, lo, hi)
			}
			keys = append(keys, k)
		}
	} else {
		for i, c := range n.children {
			clo, chi := lo, hi
			if i > 0 {
				clo = n.keys[i]
			}
			if i+1 < len(n.children) {
				chi = n.keys[i+1]
			}
			keys = append(keys, checkTree(t, c, clo, chi, false)...)
		}
	}
	if n.count != len(keys) {
		t.Fatalf("node count %d, has %d rows", n.count, len(keys))
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatalf("rows out of order")
	}
	return keys
}

func treeKeys(root *node, desc bool) [][]byte {
	var c cursor
	var out [][]byte
	if desc {
		for c.seekLT(root, nil); c.valid(); c.prev() {
			out = append(out, c.row().ck())
		}
	} else {
		for c.seekGE(root, nil); c.valid(); c.next() {
			out = append(out, c.row().ck())
		}
	}
	return out
}

// testRow is a row whose key is the number k: rows order as their numbers.
func testRow(k int) row {
	key := []byte(strconv.Itoa(k))
	enc, err := EncodeKey(key)
	if err != nil {
		panic(err)
	}
	return appendRow(nil, enc, "doc", 0, key, []byte("null"), 0)
}

// TestTree_RandomOps applies random inserts and deletes in generations, keeping
// every published root, and checks after each generation that the tree matches
// a sorted model, that cursors walk it both ways and seek right, and that the
// roots of earlier generations still hold exactly their rows.
func TestTree_RandomOps(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	root := &node{}
	model := map[int]bool{}
	type version struct {
		root *node
		keys []int
	}
	var versions []version
	for gen := uint64(1); gen <= 60; gen++ {
		w := wtx{gen: gen}
		ops := rng.IntN(400)
		insertBias := 0.6
		if gen > 40 {
			insertBias = 0.3 // shrink the tree: exercises merges
		}
		for range ops {
			k := rng.IntN(5000)
			if rng.Float64() < insertBias {
				root = w.insert(root, testRow(k))
				model[k] = true
			} else {
				root = w.delete(root, testRow(k).ck(), -1)
				delete(model, k)
			}
		}
		want := make([]int, 0, len(model))
		for k := range model {
			want = append(want, k)
		}
		slices.Sort(want)
		got := checkTree(t, root, nil, nil, true)
		if len(got) != len(want) {
			t.Fatalf("gen %d: tree has %d rows, model %d", gen, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], testRow(want[i]).ck()) {
				t.Fatalf("gen %d: row %d is %q, want key %d", gen, i, got[i], want[i])
			}
		}
		back := treeKeys(root, true)
		slices.Reverse(back)
		if !slices.EqualFunc(back, got, bytes.Equal) {
			t.Fatalf("gen %d: backward walk differs from forward walk", gen)
		}
		for range 20 {
			probe := rng.IntN(5100)
			i, _ := slices.BinarySearch(want, probe)
			pk := testRow(probe).ck()
			pk = pk[:encLen(pk)] // a bound below all rows of key probe
			var c cursor
			c.seekGE(root, pk)
			if i == len(want) && c.valid() || i < len(want) && (!c.valid() || !bytes.Equal(c.row().ck(), testRow(want[i]).ck())) {
				t.Fatalf("gen %d: seekGE(%d) wrong", gen, probe)
			}
			c.seekLT(root, pk)
			if i == 0 && c.valid() || i > 0 && (!c.valid() || !bytes.Equal(c.row().ck(), testRow(want[i-1]).ck())) {
				t.Fatalf("gen %d: seekLT(%d) wrong", gen, probe)
			}
		}
		versions = append(versions, version{root, want})
	}
	for i, v := range versions {
		got := treeKeys(v.root, false)
		if len(got) != len(v.keys) {
			t.Fatalf("snapshot %d changed: %d rows, had %d", i, len(got), len(v.keys))
		}
		for j := range got {
			if !bytes.Equal(got[j], testRow(v.keys[j]).ck()) {
				t.Fatalf("snapshot %d changed at row %d", i, j)
			}
		}
	}
}

func TestTree_BulkLoad(t *testing.T) {
	for _, n := range []int{0, 1, 47, 48, 49, 100, 48 * 48, 48*48 + 1, 5000} {
		var b builder
		for i := range n {
			b.add(testRow(i))
		}
		root := b.finish()
		keys := checkTree(t, root, nil, nil, true)
		if len(keys) != n {
			t.Fatalf("bulk load of %d rows holds %d", n, len(keys))
		}
		// The loaded tree takes changes like any other.
		w := wtx{gen: 1}
		for i := 0; i < n; i += 2 {
			root = w.delete(root, testRow(i).ck(), -1)
		}
		if keys := checkTree(t, root, nil, nil, true); len(keys) != n/2 {
			t.Fatalf("after deleting half of %d rows: %d left", n, len(keys))
		}
	}
}
