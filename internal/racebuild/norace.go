//go:build !race

package racebuild

// Enabled reports that this binary was built with the race detector.
const Enabled = false
