package replica

import "errors"

var (
	// ErrNoLeader is returned by Propose when the group knows no leader
	// (an election is under way, or this node is cut off from a
	// majority). The mutation was not proposed; it may be retried.
	ErrNoLeader = errors.New("replica: the group has no leader")

	// ErrBusy is returned by Propose when the leader refused the mutation
	// (too many uncommitted entries, or a leadership transfer under way).
	// The mutation was not proposed; it may be retried after a pause.
	ErrBusy = errors.New("replica: the group's leader is busy")

	// ErrNotLeader is returned by ReadIndex on a node that does not lead
	// the group (or stopped leading it before the read was confirmed): the
	// read must go to the leader, or wait for an election.
	ErrNotLeader = errors.New("replica: this node does not lead the group")

	// ErrTimeout is returned by Propose when its context ended before the
	// mutation was committed and applied here. Its outcome is unknown: it
	// may still be committed later.
	ErrTimeout = errors.New("replica: proposal not acknowledged in time")

	// ErrLeaderChanged is returned by Propose when the group's leader
	// changed (or was lost) before the mutation was applied here, and
	// its fate was still not known a few election timeouts later (a
	// leader cut off from its majority). Its outcome is unknown, as
	// ErrTimeout's: the new leader may still commit it.
	ErrLeaderChanged = errors.New("replica: the group's leader changed before the proposal was applied (outcome unknown)")

	// ErrDropped is returned by Propose when the group's leader changed
	// before the mutation was applied and this node then applied another
	// entry at the log index the mutation had: the mutation was not
	// applied and never will be. It may be proposed again (to the new
	// leader), even if it is not idempotent.
	ErrDropped = errors.New("replica: the group's new leader dropped the proposal (not applied)")

	// ErrClosed is returned by calls on a closed Host, and by Propose for a
	// mutation still waiting when the Host closed (outcome unknown).
	ErrClosed = errors.New("replica: host closed")

	// ErrNoGroup is returned for a group this Host does not run.
	ErrNoGroup = errors.New("replica: no such group on this node")

	// ErrGroupExists is returned by AddGroup for a group already running.
	ErrGroupExists = errors.New("replica: group already running")

	// ErrMachineAhead is returned by AddGroup for a group new to this
	// node whose DurableMachine already holds applied entries (Durable
	// above 0): writes the group's log never had, such as a bucket written
	// to before its node joined a cluster. Nothing was started.
	ErrMachineAhead = errors.New("replica: the state machine holds entries the new group's log does not")

	// ErrBadOptions is returned by Open for options that cannot work.
	ErrBadOptions = errors.New("replica: bad options")

	// ErrRemote is returned by Open when the cluster address is beyond
	// loopback and neither Options.AllowRemote nor Options.TLS is set:
	// without TLS the transport has no authentication.
	ErrRemote = errors.New("replica: cluster port beyond loopback without AllowRemote")

	// ErrPeerCert is a TLS peer whose certificate names another node than
	// the one it speaks for (the node dialled, or the sender its hello
	// claims): its connection is closed.
	ErrPeerCert = errors.New("replica: the peer's certificate names another node")
)
