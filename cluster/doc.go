// Package cluster keeps Mayfly's cluster state in embedded etcd: which
// nodes are up, which node is the orchestrator, the bucket definitions and,
// for each bucket, the map of its 1024 partitions (each partition's voters,
// preferred leader and epoch).
//
// This is step 1 of issue 22: the state layer. The documents are
// replicated by package replica (step 2b), a Raft group per partition
// (go.etcd.io/raft/v3) whose voters are the partition map's.
//
// The first three nodes of the peer list (five when it has five or more)
// each run an etcd member inside the process; the others are etcd clients
// only. Every node holds a lease under /mayfly/nodes/NAME (a node whose
// lease expired is down). One node, elected through etcd, is the
// orchestrator: it places each bucket's partitions and, when a node has
// been down longer than the failover timeout, moves that node's copies to
// spare nodes or marks its partitions degraded. Each of its writes is
// fenced: one etcd transaction conditioned on its leadership key and on
// the revision of the map it read, so a deposed orchestrator cannot write
// (ErrDeposed).
//
// Keys (all under /mayfly/):
//
//	nodes/NAME          NodeInfo JSON, on the node's lease
//	orchestrator/...    the election (concurrency.Election keys)
//	buckets/NAME        BucketDef JSON (engine.BucketSettings, replicaNumber among them)
//	maps/NAME           PartitionMap JSON, written by the orchestrator only
//	ddocs/BUCKET/NAME   DesignDocDef JSON: a design document's version and body
//	search/BUCKET/NAME  a full-text index definition as stored (uuid included)
//	collections/BUCKET/manifest  engine.Manifest JSON: scopes, collection IDs
//	layout/BUCKET       a key whose mod revision is the bucket's layout revision
//	layout/BUCKET/NODE  LeadRecord JSON: the partitions NODE leads (PublishLeads)
//	coverage/BUCKET     CoverageMap JSON: each partition's views coverer (and next
//	                    coverer), written by the orchestrator only
//	coverready/BUCKET/NODE  CoverageReady JSON: a next coverer's report that its
//	                    view indexes caught up
//
// The ddocs, search and collections keys are written by the node a client
// asked (after its own service checked the change) and mirrored by every
// node (DefMirror), which applies them to its own services and buckets.
// The maps, nodes, layout and coverage keys are mirrored by every node's
// TopologyMirror, the one owner of the partition map as the node knows it.
package cluster
