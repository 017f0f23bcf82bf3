package replica

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The cluster port's connections, dialled and accepted, fail once sent
// data goes unacknowledged for deadSocket (TCP_USER_TIMEOUT) and probe an
// idle peer: a link that drops packets silently is redialled instead of
// kept until the kernel's retransmission backoff lets a frame through.
func TestPeerSocketsFailOnADeadLink(t *testing.T) {
	lc := net.ListenConfig{KeepAliveConfig: peerKeepAlive(), Control: peerSocket}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	d := net.Dialer{KeepAliveConfig: peerKeepAlive(), Control: peerSocket}
	dialled, err := d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	var acc net.Conn
	select {
	case acc = <-accepted:
		defer acc.Close()
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("no connection accepted")
	}
	for name, c := range map[string]net.Conn{"dialled": dialled, "accepted": acc} {
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var timeout, keepalive int
		var gerr, kerr error
		rc.Control(func(fd uintptr) {
			timeout, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
			keepalive, kerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		})
		if gerr != nil || kerr != nil {
			t.Fatal(gerr, kerr)
		}
		if timeout != int(deadSocket.Milliseconds()) || keepalive != 1 {
			t.Errorf("%s connection: TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d; want %d ms and 1", name, timeout, keepalive, deadSocket.Milliseconds())
		}
	}
}
