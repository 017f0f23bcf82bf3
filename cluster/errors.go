package cluster

import "errors"

var (
	// ErrDeposed is returned by a fenced write of an orchestrator that is
	// no longer the elected one (its leadership key is gone or belongs to
	// another campaign). Nothing was written.
	ErrDeposed = errors.New("cluster: not the orchestrator any more")

	// ErrMapChanged is returned by a fenced write when the partition map
	// (or the views' coverage map, see CoverageMap) changed after the
	// orchestrator read it. Nothing was written; read
	// the map again.
	ErrMapChanged = errors.New("cluster: partition map changed since it was read")

	// ErrBadPeers is returned for a peer list or node name that cannot
	// make a cluster (a malformed entry, a repeated name, the node not in
	// the list).
	ErrBadPeers = errors.New("cluster: bad peer list")

	// ErrNotFormed is returned when the cluster's etcd did not answer
	// within the start-up timeout (too few members up to make a quorum,
	// wrong addresses, ports taken).
	ErrNotFormed = errors.New("cluster: etcd cluster did not form")

	// ErrBucketExists is returned by DefineBucket when the bucket is
	// already defined.
	ErrBucketExists = errors.New("cluster: bucket already defined")

	// ErrBucketDeleted is returned by DefineBucket for a bucket
	// incarnation (name and UUID) the cluster deleted: a deleted bucket is
	// never defined again under its UUID.
	ErrBucketDeleted = errors.New("cluster: bucket incarnation deleted")

	// ErrBucketNotDefined is returned for a bucket (or a bucket's
	// incarnation, by UUID) the cluster does not define.
	ErrBucketNotDefined = errors.New("cluster: bucket not defined")

	// ErrNodeDown is returned by ReadNode and TopologyMirror.Node for a
	// node with no key under /mayfly/nodes/ (its lease expired, or it
	// never registered).
	ErrNodeDown = errors.New("cluster: node not registered")

	// ErrDefNotFound is returned when deleting a design document or a
	// search definition the cluster's state does not hold.
	ErrDefNotFound = errors.New("cluster: definition not found")
)
