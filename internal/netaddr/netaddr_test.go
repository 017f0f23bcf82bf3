package netaddr

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8091":   true,
		"127.0.0.5:1":      true,
		"[::1]:8091":       true,
		"localhost:8091":   true,
		":8091":            false,
		"0.0.0.0:8091":     false,
		"10.0.0.1:8091":    false,
		"example.com:8091": false,
		"127.0.0.1":        false, // no port: not a listen address
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
