//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package mayflybin

// lock does nothing where there is no flock: concurrent builds of one
// binary each link it, and go build's rename keeps the result whole.
func lock(string) (unlock func(), err error) { return func() {}, nil }
