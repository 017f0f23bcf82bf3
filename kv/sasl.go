package kv

import (
	"bytes"
	"context"
	"errors"
	"net"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/internal/reason"
)

// mechPlain is SASL PLAIN, the password in clear.
const mechPlain = "PLAIN"

// saslAuth runs SASL_AUTH and SASL_STEP against the users of
// Options.Auth: SCRAM-SHA512, SCRAM-SHA256 and SCRAM-SHA1 (scram.go), or
// PLAIN, whose message is authzid NUL authcid NUL password (the authcid
// is the user; the authzid, if any, must be the same).
func (c *conn) saslAuth(ctx context.Context, pkt *memd.Packet) {
	mech := string(pkt.Key)
	if pkt.Command == memd.CmdSASLStep {
		c.scramFinal(ctx, pkt)
		return
	}
	// A new login starts afresh, as Couchbase's memcached restarts a
	// connection's authentication: if it fails, the connection is logged
	// in as no one, not as the user before.
	c.user, c.bucket, c.gone = nil, nil, ""
	for _, m := range mechanisms {
		if m.name == mech {
			c.scramFirst(ctx, pkt, m.name, m.cred)
			return
		}
	}
	if mech != mechPlain {
		c.fail(pkt, memd.StatusAuthError, "unsupported SASL mechanism "+mech+": Mayfly offers "+mechList)
		return
	}
	parts := bytes.SplitN(pkt.Value, []byte{0}, 3)
	if len(parts) != 3 {
		c.fail(pkt, memd.StatusAuthError, "PLAIN: the message must be authzid NUL user NUL password")
		return
	}
	user, password := string(parts[1]), string(parts[2])
	if len(parts[0]) > 0 && string(parts[0]) != user {
		// RFC 4616: the server must check that user may act as the
		// authzid; no Mayfly user may act as another.
		c.fail(pkt, memd.StatusAuthError, "PLAIN: acting as another user (an authzid other than the user) is not supported")
		return
	}
	if c.s.opts.Auth != nil {
		gen := c.usersGeneration()
		p, err := c.s.opts.Auth.Authenticate(ctx, user, password, c.host())
		if err == nil {
			c.login(p, gen)
			c.reply(pkt, memd.StatusSuccess, nil, nil, []byte("Authenticated"), 0, 0)
			return
		}
		c.loginRefused(ctx, pkt, user, err)
		return
	}
	c.loginFailed(ctx, pkt, user)
}

// loginRefused answers a login auth refused with err: a failed login
// (ErrBadCredentials) is logged, audited and counted (auth counted it in
// its throttles); a node without the cluster's users yet is a temporary
// failure; a try not checked (throttled, busy, cancelled) is an
// authentication error, logged at most a few times a second with the count
// of those left out (it was counted already, or not checked at all).
func (c *conn) loginRefused(ctx context.Context, pkt *memd.Packet, user string, err error) {
	switch {
	case errors.Is(err, auth.ErrBadCredentials):
		c.loginFailed(ctx, pkt, user)
	case errors.Is(err, auth.ErrUsersPending):
		// A cluster node that has not loaded the cluster's users: a
		// temporary failure, the password not checked.
		c.fail(pkt, memd.StatusTmpFail, reason.Of(err))
	default:
		if ok, dropped := c.s.notChecked.Allow(); ok {
			c.s.log.Warn("kv: login not checked", "remote", c.remote, "user", auth.ShownName(user), "err", err,
				"not_logged_before", dropped)
		}
		c.fail(pkt, memd.StatusAuthError, reason.Of(err))
	}
}

// loginFailed logs, audits and answers a failed login, the user name cut
// as auth.ShownName cuts it (a name sent before login may be 16 KiB).
func (c *conn) loginFailed(ctx context.Context, pkt *memd.Packet, user string) {
	user = auth.ShownName(user)
	c.s.log.Warn("kv: login failed", "remote", c.remote, "user", user)
	if c.s.opts.Audit != nil {
		// A failed login is audited (never the password); the answer is the
		// same whether or not that succeeds.
		_ = c.s.opts.Audit(ctx, audit.Event{Time: c.s.eng.Clock().Now(), User: user, Remote: c.remote, Action: audit.ActionLoginFailed, Target: user})
	}
	c.fail(pkt, memd.StatusAuthError, "authentication failed")
}

// host is the client's address without its port, as auth throttles
// failed logins by it.
func (c *conn) host() string {
	if h, _, err := net.SplitHostPort(c.remote); err == nil {
		return h
	}
	return c.remote
}

// config is the configuration GET_CLUSTER_CONFIG serves: b's, or the
// cluster's when b is nil. port is the local port the connection came in
// on: the KV port when Options.Ports has none, or over TLS the KV TLS
// port.
func (s *Server) config(b *engine.Bucket, port int, overTLS bool) *clusterconfig.Bucket {
	p := s.opts.Ports
	switch {
	case overTLS && p.KVSSL == 0:
		p.KVSSL = port
	case !overTLS && p.KV == 0:
		p.KV = port
	}
	if b == nil {
		if s.opts.Topology == nil {
			return clusterconfig.Cluster(clusterconfig.CCCPHost, p)
		}
		t, err := s.opts.Topology(s.ctx, "")
		if err != nil {
			s.log.Warn("kv: the cluster's nodes for its configuration", "err", err)
		}
		return clusterconfig.ClusterOf(t, clusterconfig.CCCPHost, p)
	}
	c := clusterconfig.Terse(b, clusterconfig.CCCPHost, p)
	if s.opts.Topology != nil {
		t, err := s.opts.Topology(s.ctx, b.Name())
		if err != nil {
			s.log.Warn("kv: the cluster's layout of a bucket's configuration", "bucket", b.Name(), "err", err)
		}
		c = c.WithTopology(t, clusterconfig.CCCPHost, p)
	}
	return c
}
