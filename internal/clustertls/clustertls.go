// Package clustertls is the cluster's mutual TLS: a private certificate
// authority, a certificate per node signed by it that names the node, and
// the credentials (certificate, key, the CA to trust) a node loads to speak
// to the others.
//
// A directory made by Generate holds ca.pem and ca-key.pem (the CA), and
// per node NAME.pem and NAME-key.pem. A node's certificate carries its
// hosts and IPs as subject alternative names (etcd's peer and client
// connections check them) and its name as the URI mayfly://node/NAME
// (the Raft transport checks that a connection speaks for the node its
// certificate names: NodeName). It is good for both server and client
// authentication.
package clustertls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Files of a certificate directory.
const (
	// CAFile is the CA's certificate, which every node trusts.
	CAFile = "ca.pem"
	// CAKeyFile is the CA's private key: it signs certificates and stays
	// off the nodes.
	CAKeyFile = "ca-key.pem"
)

// DefaultValidity is how long Generate's certificates are valid: 10
// years.
const DefaultValidity = 10 * 365 * 24 * time.Hour

// nodeURIScheme and nodeURIHost make the URI naming a node in its
// certificate: mayfly://node/NAME.
const (
	nodeURIScheme = "mayfly"
	nodeURIHost   = "node"
)

var (
	// ErrCAExists is Generate refusing to replace an existing CA key.
	ErrCAExists = errors.New("clustertls: the directory has a CA key already")
	// ErrNotNode is a certificate that names no node (or another node
	// than expected).
	ErrNotNode = errors.New("clustertls: the certificate does not name the node")
	// ErrBadNode is a node spec Generate cannot use.
	ErrBadNode = errors.New("clustertls: bad node")
)

// Node is a node to issue a certificate for: its name and the hosts (DNS
// names or IPs) it is reached at.
type Node struct {
	Name  string
	Hosts []string
}

// CertFile is the path of node name's certificate in dir.
func CertFile(dir, name string) string { return filepath.Join(dir, name+".pem") }

// KeyFile is the path of node name's private key in dir.
func KeyFile(dir, name string) string { return filepath.Join(dir, name+"-key.pem") }

// GenerateOptions are Generate's choices; the zero value is the default.
type GenerateOptions struct {
	// Validity is how long the certificates are valid from Now. The
	// default value is DefaultValidity.
	Validity time.Duration
	// NewCA makes a new CA even when dir has one (replacing its key: the
	// certificates it signed are no longer trusted by nodes given the new
	// ca.pem).
	NewCA bool
	// Now is the certificates' start of validity; the zero value is the
	// wall clock's now.
	Now time.Time
}

// Generate writes nodes' certificates and keys into dir (created if
// need be), signed by dir's CA. Without a CA in dir, it makes one (ECDSA
// P-256); with one, it signs with it (a node added later), unless
// opts.NewCA, which replaces it. It never replaces a CA key untold: with
// only one of ca.pem and ca-key.pem there, it fails with ErrCAExists. It
// reports whether it made a new CA. Keys are written 0600.
func Generate(dir string, nodes []Node, opts GenerateOptions) (newCA bool, err error) {
	if opts.Validity == 0 {
		opts.Validity = DefaultValidity
	}
	if opts.Validity < 0 {
		return false, fmt.Errorf("clustertls: validity %v", opts.Validity)
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now() // wall clock: a certificate's validity is real time
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if err := checkNode(n); err != nil {
			return false, err
		}
		if seen[n.Name] {
			return false, fmt.Errorf("%w: %q given twice", ErrBadNode, n.Name)
		}
		seen[n.Name] = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("clustertls: %w", err)
	}
	caCert, caKey, err := loadCA(dir)
	switch {
	case opts.NewCA || errors.Is(err, os.ErrNotExist) && !exists(filepath.Join(dir, CAFile)) && !exists(filepath.Join(dir, CAKeyFile)):
		if caCert, caKey, err = newCAPair(dir, opts); err != nil {
			return false, err
		}
		newCA = true
	case errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("%w: %s has one of %s and %s without the other: give a new CA to replace them", ErrCAExists, dir, CAFile, CAKeyFile)
	case err != nil:
		return false, err
	}
	for _, n := range nodes {
		if err := issue(dir, n, caCert, caKey, opts); err != nil {
			return newCA, err
		}
	}
	return newCA, nil
}

// checkNode checks a node spec: a name usable as a file name and a node
// name, at least one host.
func checkNode(n Node) error {
	if n.Name == "" || len(n.Name) > 64 || n.Name == "ca" {
		return fmt.Errorf("%w: name %q", ErrBadNode, n.Name)
	}
	for _, r := range n.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%w: name %q (letters, digits, '-', '_', '.')", ErrBadNode, n.Name)
		}
	}
	if len(n.Hosts) == 0 {
		return fmt.Errorf("%w: %s has no host", ErrBadNode, n.Name)
	}
	for _, h := range n.Hosts {
		if h == "" {
			return fmt.Errorf("%w: %s has an empty host", ErrBadNode, n.Name)
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loadCA reads dir's CA certificate and key.
func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, err
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertls: the CA in %s: %w", dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("clustertls: the CA key in %s is not ECDSA", dir)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("clustertls: the CA in %s: %w", dir, err)
	}
	if !cert.IsCA {
		return nil, nil, fmt.Errorf("clustertls: %s is not a CA certificate", filepath.Join(dir, CAFile))
	}
	return cert, key, nil
}

// newCAPair makes a CA and writes it into dir.
func newCAPair(dir string, opts GenerateOptions) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertls: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Mayfly cluster CA", Organization: []string{"Mayfly"}},
		NotBefore:             opts.Now.Add(-time.Hour), // a node's clock a little behind
		NotAfter:              opts.Now.Add(opts.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertls: making the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile), der, key); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// issue writes node n's certificate and key into dir, signed by the CA.
func issue(dir string, n Node, ca *x509.Certificate, caKey *ecdsa.PrivateKey, opts GenerateOptions) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("clustertls: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: n.Name, Organization: []string{"Mayfly"}},
		NotBefore:    opts.Now.Add(-time.Hour),
		NotAfter:     opts.Now.Add(opts.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{NodeURI(n.Name)},
	}
	for _, h := range n.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter // a node's certificate outlives not its CA
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("clustertls: issuing %s's certificate: %w", n.Name, err)
	}
	return writePair(CertFile(dir, n.Name), KeyFile(dir, n.Name), der, key)
}

// serial is a random 128-bit serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// writePair writes a certificate (0644) and its key (0600), the key
// first: a certificate is never there without its key.
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("clustertls: %w", err)
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFile replaces path with data (through a temporary file, so a
// crash leaves the old file or the new, and the mode is data's from the
// start).
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("clustertls: %w", err)
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("clustertls: writing %s: %w", path, err)
	}
	return nil
}

// NodeURI is the URI naming node name in its certificate.
func NodeURI(name string) *url.URL {
	return &url.URL{Scheme: nodeURIScheme, Host: nodeURIHost, Path: "/" + name}
}

// NodeName is the node cert names (its mayfly://node/NAME URI), or
// ErrNotNode.
func NodeName(cert *x509.Certificate) (string, error) {
	name := ""
	for _, u := range cert.URIs {
		if u.Scheme == nodeURIScheme && u.Host == nodeURIHost && len(u.Path) > 1 {
			if name != "" {
				return "", fmt.Errorf("%w: it names two nodes", ErrNotNode)
			}
			name = u.Path[1:]
		}
	}
	if name == "" {
		return "", fmt.Errorf("%w: no mayfly://node/NAME in %q's certificate", ErrNotNode, cert.Subject.CommonName)
	}
	return name, nil
}

// Creds are a node's credentials: its certificate and key, and the CA it
// trusts, from a certificate directory.
type Creds struct {
	// Dir is the directory they were read from.
	Dir string
	// Name is the node the certificate names.
	Name string
	// Cert is the node's certificate and key.
	Cert tls.Certificate
	// CA is the pool of the cluster's CA.
	CA *x509.CertPool
}

// CAFile is the path of the CA certificate the credentials trust.
func (c *Creds) CAFile() string { return filepath.Join(c.Dir, CAFile) }

// CertFile is the path of the node's certificate.
func (c *Creds) CertFile() string { return CertFile(c.Dir, c.Name) }

// KeyFile is the path of the node's key.
func (c *Creds) KeyFile() string { return KeyFile(c.Dir, c.Name) }

// Load reads node name's credentials from dir: ca.pem, NAME.pem and
// NAME-key.pem. The certificate must chain to the CA, be valid now and
// name the node (ErrNotNode otherwise).
func Load(dir, name string) (*Creds, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("clustertls: the cluster's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("clustertls: %s holds no certificate", filepath.Join(dir, CAFile))
	}
	pair, err := tls.LoadX509KeyPair(CertFile(dir, name), KeyFile(dir, name))
	if err != nil {
		return nil, fmt.Errorf("clustertls: node %s's certificate: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("clustertls: node %s's certificate: %w", name, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("clustertls: node %s's certificate does not verify against %s: %w", name, filepath.Join(dir, CAFile), err)
	}
	got, err := NodeName(leaf)
	if err != nil {
		return nil, err
	}
	if got != name {
		return nil, fmt.Errorf("%w: %s names node %q, not %q", ErrNotNode, CertFile(dir, name), got, name)
	}
	pair.Leaf = leaf
	return &Creds{Dir: dir, Name: name, Cert: pair, CA: pool}, nil
}

// Config is a TLS 1.3 configuration presenting the node's certificate
// and trusting only the cluster's CA, both ways: as a server it requires
// and verifies the client's certificate, as a client the server's (a
// client sets ServerName, or its dialer does). Each call returns a new
// Config.
func (c *Creds) Config() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.Cert},
		RootCAs:      c.CA,
		ClientCAs:    c.CA,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}
