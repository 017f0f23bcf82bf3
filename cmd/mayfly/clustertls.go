package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/internal/clustertls"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// addClusterTLSFlag defines serve's --cluster-tls.
func addClusterTLSFlag(fs *pflag.FlagSet, c *clusterFlags) {
	fs.StringVar(&c.tlsDir, "cluster-tls", "", "mutual TLS 1.3 between the nodes with the certificates in this directory (made by mayfly cluster certs: ca.pem, NODE.pem, NODE-key.pem): etcd's peer and client ports and the cluster port's Raft transport refuse whoever has no certificate of the cluster's CA, and a node's Raft connections must carry its own name; every node needs it, or none")
}

// creds loads --cluster-tls's credentials of --node, nil without
// --cluster-tls.
func (c *clusterFlags) creds() (*clustertls.Creds, error) {
	if c.tlsDir == "" {
		return nil, nil
	}
	if c.peers == "" {
		return nil, fmt.Errorf("--cluster-tls goes with --peers")
	}
	cr, err := clustertls.Load(c.tlsDir, c.node)
	if err != nil {
		return nil, fmt.Errorf("--cluster-tls: %w", err)
	}
	return cr, nil
}

// raftTLS is the Raft transport's TLS configuration for creds (nil: plain).
func raftTLS(creds *clustertls.Creds) *tls.Config {
	if creds == nil {
		return nil
	}
	return creds.Config()
}

// statusTLS are `mayfly cluster status`'s TLS flags.
type statusTLS struct{ dir, node string }

func (s *statusTLS) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.dir, "cluster-tls", "", "the cluster's certificate directory, as given to serve: connect to etcd over mutual TLS presenting --node's certificate")
	f.StringVar(&s.node, "node", "", "with --cluster-tls: the node whose certificate (NAME.pem, NAME-key.pem in the directory) to present")
}

// endpoints are the etcd client URLs of a peer list: https ones with
// --cluster-tls.
func (s *statusTLS) endpoints(peers []cluster.Peer, clientOffset int) []string {
	if s.dir != "" {
		return cluster.TLSClientEndpoints(peers, clientOffset)
	}
	return cluster.ClientEndpoints(peers, clientOffset)
}

// connect is an etcd client of the cluster at eps, over TLS with
// --cluster-tls.
func (s *statusTLS) connect(ctx context.Context, eps []string, timeout time.Duration) (*clientv3.Client, error) {
	switch {
	case s.dir == "" && s.node != "":
		return nil, &usageError{"--node goes with --cluster-tls"}
	case s.dir == "":
		return cluster.Connect(ctx, eps, timeout, nil)
	case s.node == "":
		return nil, &usageError{"--cluster-tls needs --node (whose certificate to present)"}
	}
	creds, err := clustertls.Load(s.dir, s.node)
	if err != nil {
		return nil, err
	}
	return cluster.ConnectTLS(ctx, eps, creds, timeout, nil)
}

// newClusterCertsCmd is `mayfly cluster certs`.
func newClusterCertsCmd() *cobra.Command {
	var out, peers string
	var nodes []string
	var valid time.Duration
	var newCA bool
	cmd := &cobra.Command{
		Use:   "certs --out DIR (--peers n1=HOST:PORT,... | --node NAME=HOST[,HOST...] ...)",
		Short: "Make the cluster's CA and each node's certificate, for serve --cluster-tls",
		Long: `Makes a certificate authority for the cluster (ECDSA P-256) in DIR, ca.pem
and ca-key.pem, and for each node a certificate signed by it, NAME.pem, with
its key, NAME-key.pem (keys are written 0600). A node's certificate names
the node (the Raft transport checks a node speaks as itself) and carries
the hosts and IPs it is reached at (etcd checks them): each node's host in
--peers (the list given to serve), and those given with --node
NAME=HOST[,HOST...] (repeatable; a node in both gets both). Certificates are
good for server and client authentication, for --valid (10 years).

Copy ca.pem, NAME.pem and NAME-key.pem to node NAME and start it with
serve --cluster-tls DIR. Keep ca-key.pem off the nodes: it signs. Run certs
again on the same DIR to add a node: its CA is kept (the other nodes trust
the new certificate as they are). It never replaces a CA key unless
--new-ca (the nodes then need the new ca.pem and new certificates).`,
		Example: `  mayfly cluster certs --out certs --peers n1=10.0.0.1:7000,n2=10.0.0.2:7000,n3=10.0.0.3:7000
  mayfly cluster certs --out certs --node n1=db1.example,10.0.0.1 --node n2=db2.example`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &usageError{"needs --out DIR"}
			}
			specs, err := certNodes(peers, nodes)
			if err != nil {
				return err
			}
			made, err := clustertls.Generate(out, specs, clustertls.GenerateOptions{Validity: valid, NewCA: newCA})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if made {
				fmt.Fprintf(w, "mayfly: made the cluster's CA: %s (its key %s: keep it off the nodes)\n",
					filepath.Join(out, clustertls.CAFile), filepath.Join(out, clustertls.CAKeyFile))
			} else {
				fmt.Fprintf(w, "mayfly: signed with the CA already in %s\n", out)
			}
			for _, n := range specs {
				fmt.Fprintf(w, "mayfly: %s: %s and %s, for %s\n", n.Name, clustertls.CertFile(out, n.Name), clustertls.KeyFile(out, n.Name), strings.Join(n.Hosts, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "the directory to write into (created if need be)")
	f.StringVar(&peers, "peers", "", "the cluster's peer list, as given to serve: a certificate for each node, for its host")
	f.StringArrayVar(&nodes, "node", nil, "NAME=HOST[,HOST...]: a certificate for node NAME, for these hosts or IPs (repeatable)")
	f.DurationVar(&valid, "valid", clustertls.DefaultValidity, "how long the certificates are valid")
	f.BoolVar(&newCA, "new-ca", false, "make a new CA even if DIR has one (replacing its key)")
	return cmd
}

// certNodes is the nodes certs issues for: those of the peer list and
// those of --node, hosts merged by name, in the order given.
func certNodes(peers string, nodes []string) ([]clustertls.Node, error) {
	var out []clustertls.Node
	add := func(name string, hosts ...string) {
		i := slices.IndexFunc(out, func(n clustertls.Node) bool { return n.Name == name })
		if i < 0 {
			out = append(out, clustertls.Node{Name: name})
			i = len(out) - 1
		}
		for _, h := range hosts {
			if !slices.Contains(out[i].Hosts, h) {
				out[i].Hosts = append(out[i].Hosts, h)
			}
		}
	}
	if peers != "" {
		ps, err := cluster.ParsePeers(peers)
		if err != nil {
			return nil, &usageError{"--peers: " + err.Error()}
		}
		for _, p := range ps {
			add(p.Name, p.Host)
		}
	}
	for _, n := range nodes {
		name, hosts, ok := strings.Cut(n, "=")
		if !ok || name == "" || hosts == "" {
			return nil, &usageError{fmt.Sprintf("--node %q: want NAME=HOST[,HOST...]", n)}
		}
		var hs []string
		for h := range strings.SplitSeq(hosts, ",") {
			if h = strings.TrimSpace(h); h == "" {
				return nil, &usageError{fmt.Sprintf("--node %q: an empty host", n)}
			}
			hs = append(hs, h)
		}
		add(name, hs...)
	}
	if len(out) == 0 {
		return nil, &usageError{"needs --peers or --node: the nodes to make certificates for"}
	}
	return out, nil
}
