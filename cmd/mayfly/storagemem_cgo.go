//go:build cgo

package main

// storageMemInGoHeap says whether pebble's block cache and memtables are in
// the Go heap: with cgo, pebble allocates them with C's malloc.
const storageMemInGoHeap = false
