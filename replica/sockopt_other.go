//go:build !linux

package replica

import "syscall"

// peerSocket sets nothing where TCP_USER_TIMEOUT is Linux's: keepalives
// (peerKeepAlive) alone find a dead link, once it is idle.
func peerSocket(_, _ string, _ syscall.RawConn) error { return nil }
