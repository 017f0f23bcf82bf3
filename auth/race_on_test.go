//go:build race

package auth

// raceBuild says the tests run under the race detector, under which
// sync.Pool drops what it is given at random (so pooled state allocates).
const raceBuild = true
