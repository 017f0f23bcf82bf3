//go:build !cgo

package main

// storageMemInGoHeap says whether pebble's block cache and memtables are in
// the Go heap: without cgo, pebble allocates them as Go slices.
const storageMemInGoHeap = true
