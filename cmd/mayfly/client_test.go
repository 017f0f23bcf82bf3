package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Credentials: -u USER -p PASSWORD, -u USER:PASSWORD, or the environment.
func TestCredentials(t *testing.T) {
	f := cliServer(t)
	t.Setenv("MAYFLY_USER", "")
	t.Setenv("MAYFLY_PASSWORD", "")
	try := func(args ...string) result {
		var out, errOut bytes.Buffer
		code := run(append([]string{"stats", "curr_items", "--host", f.url}, args...), &out, &errOut)
		return result{code, out.String(), errOut.String()}
	}
	for _, args := range [][]string{{"-u", adminUser, "-p", adminPass}, {"-u", adminU}, {"--user", adminUser, "--password", adminPass}} {
		if r := try(args...); r.code != 0 {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := try("-u", adminUser, "-p", "wrong"); r.code != 1 || !strings.Contains(r.errOut, "unauthorized") {
		t.Errorf("wrong password: %v", r)
	}
	if r := try(); r.code != 1 || !strings.Contains(r.errOut, "MAYFLY_USER") {
		t.Errorf("no credentials: %v", r)
	}
	t.Setenv("MAYFLY_USER", adminUser)
	t.Setenv("MAYFLY_PASSWORD", adminPass)
	if r := try(); r.code != 0 {
		t.Errorf("credentials from the environment: %v", r)
	}
	t.Setenv("MAYFLY_HOST", f.url)
	var out bytes.Buffer
	if code := run([]string{"stats", "curr_items"}, &out, io.Discard); code != 0 || out.String() != " curr_items: 0\n" {
		t.Errorf("MAYFLY_HOST: %d %q", code, out.String())
	}
}

// The client commands trust a private CA given with --cacert.
func TestCACert(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	_, addr := doorServer(t, "--tls-cert", certFile, "--tls-key", keyFile)
	if code, out, errOut := runCmd("stats", "curr_items", "--host", "https://"+addr, "-u", adminU, "--cacert", certFile); code != 0 || out != " curr_items: 0\n" {
		t.Fatalf("stats with --cacert: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("stats", "--host", "https://"+addr, "-u", adminU); code != 1 || !strings.Contains(errOut, "--cacert") || strings.Contains(errOut, "x509:") {
		t.Fatalf("stats without --cacert: %d %q", code, errOut)
	}
}
