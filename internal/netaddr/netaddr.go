// Package netaddr holds what Mayfly's listeners need to know of a listen
// address.
package netaddr

import "net"

// IsLoopback reports whether a listen address (host:port) is on loopback
// only: "localhost" or a loopback IP. An empty host (every interface), any
// other name, or an address that does not parse is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
