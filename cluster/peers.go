package cluster

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Default port offsets from a node's cluster port P.
const (
	// DefaultEtcdPeerOffset puts etcd's peer port (member to member Raft
	// traffic) at P+1.
	DefaultEtcdPeerOffset = 1
	// DefaultEtcdClientOffset puts etcd's client port (gRPC, what every
	// node's etcd client dials) at P+2.
	DefaultEtcdClientOffset = 2
)

// Peer is one node of the peer list: its name and its cluster address
// (host and cluster port P). Step 1 does not listen on P itself: it is
// kept for Mayfly's own inter-node transport (step 2); etcd's ports are
// derived from it.
type Peer struct {
	Name string
	Host string
	Port int
}

// Addr is the peer's cluster address, HOST:PORT.
func (p Peer) Addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) }

// url is scheme://HOST:P+offset.
func (p Peer) url(scheme string, offset int) url.URL {
	return url.URL{Scheme: scheme, Host: net.JoinHostPort(p.Host, strconv.Itoa(p.Port+offset))}
}

// ParsePeers reads a peer list, n1=HOST:PORT,n2=HOST:PORT,... (spaces
// around entries are ignored). Names must be unique and made of letters,
// digits, '-', '_' and '.'; each port leaves room for the etcd ports above
// it.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "=")
		if !ok || !validName(name) {
			return nil, fmt.Errorf("%w: %q is not NAME=HOST:PORT (a name of letters, digits, '-', '_', '.')", ErrBadPeers, item)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%w: %q: the address must be HOST:PORT", ErrBadPeers, item)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535-DefaultEtcdClientOffset {
			return nil, fmt.Errorf("%w: %q: the port must be 1..%d", ErrBadPeers, item, 65535-DefaultEtcdClientOffset)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: node %q is listed twice", ErrBadPeers, name)
		}
		seen[name] = true
		out = append(out, Peer{Name: name, Host: host, Port: n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no peers", ErrBadPeers)
	}
	return out, nil
}

// validName reports whether s is a usable node name (it becomes an etcd
// member name and a key segment).
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// EtcdMembers is how many nodes of a peer list of n run an etcd member:
// the first 3, or the first 5 when there are 5 or more (a quorum survives
// one, or two, members down), or all of them when there are fewer than 3.
func EtcdMembers(n int) int {
	switch {
	case n >= 5:
		return 5
	case n >= 3:
		return 3
	}
	return n
}

// ClientEndpoints are the etcd client URLs of the members of a peer list
// (its first EtcdMembers), for an etcd client: http:// ones.
func ClientEndpoints(peers []Peer, clientOffset int) []string {
	return clientEndpoints(peers, "http", clientOffset)
}

// TLSClientEndpoints are ClientEndpoints of a cluster on mutual TLS
// (Config.TLS): https:// ones.
func TLSClientEndpoints(peers []Peer, clientOffset int) []string {
	return clientEndpoints(peers, "https", clientOffset)
}

func clientEndpoints(peers []Peer, scheme string, clientOffset int) []string {
	if clientOffset == 0 {
		clientOffset = DefaultEtcdClientOffset
	}
	out := make([]string, 0, EtcdMembers(len(peers)))
	for _, p := range peers[:EtcdMembers(len(peers))] {
		u := p.url(scheme, clientOffset)
		out = append(out, u.String())
	}
	return out
}
