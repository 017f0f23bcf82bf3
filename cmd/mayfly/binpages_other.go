//go:build !linux

package main

// releaseBinaryPages does nothing beyond Linux (binpages_linux.go).
func releaseBinaryPages() (int64, error) { return 0, nil }
