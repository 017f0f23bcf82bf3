//go:build !linux

package main

// binaryPages releases nothing beyond Linux (binpages_linux.go).
type binaryPages struct{}

// newBinaryPages returns a binaryPages that releases nothing.
func newBinaryPages() (*binaryPages, error) { return nil, nil }

// release does nothing beyond Linux.
func (*binaryPages) release() (int64, error) { return 0, nil }
