package chaostest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// ipForward is the root namespace's IPv4 forwarding switch: the netLab
// routes between its namespaces.
const ipForward = "/proc/sys/net/ipv4/ip_forward"

// errNoNetLab says the machine cannot host a netLab (not root, no `ip`).
var errNoNetLab = errors.New("network namespaces unavailable")

// netLab is a network for cluster nodes that can really be partitioned:
// each node in a network namespace of its own (named mfiso<tag>n<i>, tag unique to the lab),
// reached through a veth pair from the root namespace, which routes
// between them (each namespace's default route is its veth's root end).
// A cut is a pair of policy-routing blackhole rules per cut link, in the
// root namespace, selected by the interface a packet comes in on: what
// one namespace sends to another is dropped, both ways, TCP connections
// included (nothing tells either end), while the harness, in the root
// namespace, still reaches every node (its packets come in on no veth).
// No iptables or nft needed: `ip` only. Everything is removed at the
// test's end.
type netLab struct {
	t      *testing.T
	tag    string
	n      int
	subnet int // the second octet of 10.subnet.i.0/24
	rules  map[string][]string
}

// newNetLab makes n namespaces, or says why it cannot (errNoNetLab).
func newNetLab(t *testing.T, n int) (*netLab, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root", errNoNetLab)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: %w", errNoNetLab, err)
	}
	// Names and addresses of their own for each lab: the kernel deletes a
	// namespace's veth pair some time after the namespace, so that the
	// next case's lab, made at once, must not reuse the names.
	u := int(time.Now().UnixNano()/1000+int64(os.Getpid())) % 100000 // wall clock: a unique name
	l := &netLab{t: t, tag: fmt.Sprintf("mfiso%05d", u), n: n, subnet: 100 + u%100, rules: map[string][]string{}}
	before, err := os.ReadFile(ipForward)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoNetLab, err)
	}
	t.Cleanup(func() {
		for _, r := range l.rules {
			l.ip(append([]string{"rule", "del"}, r...)...)
		}
		for i := range n {
			// Deleting a namespace deletes its veth pair.
			l.ip("netns", "del", l.ns(i))
		}
		os.WriteFile(ipForward, before, 0o644)
	})
	for i := range n {
		ns, host, peer := l.ns(i), l.tag+"h"+fmt.Sprint(i+1), l.tag+"v"+fmt.Sprint(i+1)
		gw := fmt.Sprintf("10.%d.%d.1", l.subnet, i+1)
		steps := [][]string{
			{"netns", "add", ns},
			{"link", "add", host, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", ns},
			{"addr", "add", gw + "/24", "dev", host},
			{"link", "set", host, "up"},
			{"-n", ns, "addr", "add", l.Addr(i) + "/24", "dev", peer},
			{"-n", ns, "link", "set", peer, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "route", "add", "default", "via", gw},
		}
		for _, s := range steps {
			if err := l.ip(s...); err != nil {
				return nil, err
			}
		}
	}
	if err := os.WriteFile(ipForward, []byte("1\n"), 0o644); err != nil {
		return nil, fmt.Errorf("%w: enabling forwarding: %w", errNoNetLab, err)
	}
	return l, nil
}

// ns is node i's namespace (from 0).
func (l *netLab) ns(i int) string { return fmt.Sprintf("%sn%d", l.tag, i+1) }

// Addr is node i's address, in its namespace.
func (l *netLab) Addr(i int) string { return fmt.Sprintf("10.%d.%d.2", l.subnet, i+1) }

// ip runs `ip args...`.
func (l *netLab) ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// command is a command run in node i's namespace.
func (l *netLab) command(i int, bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.ns(i), bin}, args...)...)
}

// cut drops every packet between node i and each of others, both ways.
func (l *netLab) cut(i int, others []int) error {
	for _, o := range others {
		for _, r := range [][]string{
			{"iif", l.tag + "h" + fmt.Sprint(i+1), "to", l.Addr(o), "blackhole"},
			{"iif", l.tag + "h" + fmt.Sprint(o+1), "to", l.Addr(i), "blackhole"},
		} {
			key := strings.Join(r, " ")
			if _, ok := l.rules[key]; ok {
				continue
			}
			if err := l.ip(append([]string{"rule", "add"}, r...)...); err != nil {
				return err
			}
			l.rules[key] = r
		}
	}
	return nil
}

// heal lifts every cut.
func (l *netLab) heal() error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(l.rules)) {
		if err := l.ip(append([]string{"rule", "del"}, l.rules[key]...)...); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(l.rules, key)
	}
	return errors.Join(errs...)
}
