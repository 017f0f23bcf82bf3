//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package memcache

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the leader has closed (or reset) the pooled
// connection nc, or sent on it what no command asked for, without
// waiting: a peek at the socket that does not block. A connection whose
// state cannot be read is taken as closed.
func peerClosed(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var closed bool
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		for {
			_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(rerr, syscall.EINTR):
				continue
			case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
				closed = false // nothing to read: open and quiet
			default:
				// Nothing read (rerr nil) is the leader's FIN; a byte,
				// something no command asked for; an error, a reset.
				closed = true
			}
			return true // never wait for the socket
		}
	})
	return closed || err != nil
}
