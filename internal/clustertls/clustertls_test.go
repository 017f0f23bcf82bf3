package clustertls_test

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/clustertls"
)

// TestGenerate checks what an operator relies on: the CA and each node's
// files are there, keys are 0600, each node's certificate chains to the
// CA for both server and client use, carries its hosts and names its
// node, and Load reads it back.
func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	newCA, err := clustertls.Generate(dir, []clustertls.Node{
		{Name: "n1", Hosts: []string{"127.0.0.1", "db1.example"}},
		{Name: "n2", Hosts: []string{"10.0.0.2"}},
	}, clustertls.GenerateOptions{})
	if err != nil || !newCA {
		t.Fatalf("Generate: %v, new CA %v", err, newCA)
	}
	for _, f := range []string{"ca.pem", "ca-key.pem", "n1.pem", "n1-key.pem", "n2.pem", "n2-key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if strings.HasSuffix(f, "-key.pem") {
			want = 0o600
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", f, fi.Mode().Perm(), want)
		}
	}
	c, err := clustertls.Load(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	leaf := c.Cert.Leaf
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.CA, DNSName: "db1.example", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("n1's certificate for %v: %v", usage, err)
		}
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if err := leaf.VerifyHostname("10.0.0.2"); err == nil {
		t.Error("n1's certificate is good for n2's address")
	}
	if name, err := clustertls.NodeName(leaf); err != nil || name != "n1" {
		t.Errorf("NodeName: %q %v", name, err)
	}
	if years := leaf.NotAfter.Sub(time.Now()).Hours() / 24 / 365; years < 9.9 || years > 10.1 {
		t.Errorf("valid for %.1f years, want 10", years)
	}
	if c.Config().MinVersion != 0x0304 {
		t.Error("Config is not TLS 1.3 only")
	}

	// n2's files do not pass for n1.
	if err := os.Rename(filepath.Join(dir, "n2.pem"), filepath.Join(dir, "n1.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "n2-key.pem"), filepath.Join(dir, "n1-key.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := clustertls.Load(dir, "n1"); !errors.Is(err, clustertls.ErrNotNode) {
		t.Errorf("n2's certificate loaded as n1: %v", err)
	}
}

// TestGenerateKeepsTheCA checks a second run signs with the CA there (a
// node added later is trusted by the others), a new CA only when asked,
// and a CA key is never replaced untold.
func TestGenerateKeepsTheCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := clustertls.Generate(dir, []clustertls.Node{{Name: "n1", Hosts: []string{"127.0.0.1"}}}, clustertls.GenerateOptions{}); err != nil {
		t.Fatal(err)
	}
	caKey, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	newCA, err := clustertls.Generate(dir, []clustertls.Node{{Name: "n4", Hosts: []string{"127.0.0.1"}}}, clustertls.GenerateOptions{})
	if err != nil || newCA {
		t.Fatalf("second Generate: %v, new CA %v", err, newCA)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem")); string(again) != string(caKey) {
		t.Fatal("the CA key changed")
	}
	n1, err := clustertls.Load(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	n4, err := clustertls.Load(dir, "n4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n4.Cert.Leaf.Verify(x509.VerifyOptions{Roots: n1.CA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("n4 is not trusted by n1's CA: %v", err)
	}

	if newCA, err := clustertls.Generate(dir, []clustertls.Node{{Name: "n1", Hosts: []string{"127.0.0.1"}}}, clustertls.GenerateOptions{NewCA: true}); err != nil || !newCA {
		t.Fatalf("Generate NewCA: %v %v", err, newCA)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem")); string(again) == string(caKey) {
		t.Fatal("NewCA kept the CA key")
	}
	// n4 was signed by the old CA: no longer loads.
	if _, err := clustertls.Load(dir, "n4"); err == nil {
		t.Error("a certificate of the replaced CA still loads")
	}

	// A key without its certificate is not replaced.
	if err := os.Remove(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := clustertls.Generate(dir, []clustertls.Node{{Name: "n1", Hosts: []string{"h"}}}, clustertls.GenerateOptions{}); !errors.Is(err, clustertls.ErrCAExists) {
		t.Errorf("Generate over a lone CA key: %v, want ErrCAExists", err)
	}
}

func TestGenerateRefusesBadNodes(t *testing.T) {
	for _, nodes := range [][]clustertls.Node{
		{{Name: "n1"}},
		{{Name: "ca", Hosts: []string{"h"}}},
		{{Name: "../x", Hosts: []string{"h"}}},
		{{Name: "n1", Hosts: []string{"h"}}, {Name: "n1", Hosts: []string{"g"}}},
	} {
		dir := t.TempDir()
		if _, err := clustertls.Generate(dir, nodes, clustertls.GenerateOptions{}); !errors.Is(err, clustertls.ErrBadNode) {
			t.Errorf("Generate %+v: %v, want ErrBadNode", nodes, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("Generate %+v wrote files", nodes)
		}
	}
}

func TestNodeName(t *testing.T) {
	cert := &x509.Certificate{URIs: nil}
	if _, err := clustertls.NodeName(cert); !errors.Is(err, clustertls.ErrNotNode) {
		t.Errorf("no URI: %v", err)
	}
	cert.URIs = append(cert.URIs, clustertls.NodeURI("n2"))
	if name, err := clustertls.NodeName(cert); err != nil || name != "n2" {
		t.Errorf("%q %v", name, err)
	}
	cert.URIs = append(cert.URIs, clustertls.NodeURI("n3"))
	if _, err := clustertls.NodeName(cert); !errors.Is(err, clustertls.ErrNotNode) {
		t.Errorf("two names: %v", err)
	}
}
