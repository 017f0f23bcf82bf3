package replica

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peerSocket is net.Dialer's and net.ListenConfig's Control for the
// cluster port's sockets: TCP_USER_TIMEOUT (deadSocket) bounds how long
// sent data (or a keepalive probe) may stay unacknowledged before the
// kernel fails the connection. Without it a link whose packets are
// silently dropped (a network partition, a peer's machine gone) keeps the
// connection open: writes fill the socket's buffer without an error, and
// once the link heals, the kernel's retransmission backoff, grown past
// 20 s by then, delays the first frame as long (the chaos test's isolate
// case caught up 29–33 s after the heal). Failed, the connection is
// dialled again, at once once the link is back. Accepted sockets inherit
// the option from the listening one.
func peerSocket(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(deadSocket.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
