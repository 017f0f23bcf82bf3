// Package replica replicates Mayfly's partitions: one go.etcd.io/raft/v3
// group per partition, many groups on one Host per node (issue 22, step
// 2a).
//
// A Host runs every group of which its node is a voter. It owns:
//
//   - one ticker for all groups (Options.TickInterval);
//   - one worker goroutine that drains the groups with something to do in
//     rounds: it collects their raft Ready, writes every group's new log
//     entries, HardState, snapshot and applied state-machine changes into
//     one pebble batch, syncs it once, then sends the messages (batched per
//     peer), hands the results to the waiting proposers and advances the
//     groups. An idle group costs no goroutine and no work but its tick;
//   - a store, pebble under <data>/cluster/raft, holding every group's log,
//     Raft state, snapshot and, through Writer, its state machine's data,
//     so one commit holds a round's log entries, Raft state and applied
//     mutations;
//   - a transport on the node's cluster port: one outgoing TCP connection
//     to each peer carrying the messages of all groups in length-prefixed
//     frames, reconnected with backoff.
//
// The document engine plugs in through StateMachine (Apply, Snapshot,
// Restore); a writer submits an opaque mutation with Host.Propose and gets
// back, once it is committed on a majority and applied here, its log index
// and what the state machine returned for it.
//
// Membership comes from the partition map (cluster.PartitionMap): a
// group's voters are the partition's voters, each node's Raft ID is derived
// from its name (NodeID), and names resolve to cluster addresses through a
// Resolver (ClusterResolver reads etcd's nodes/NAME). A new group starts
// on every voter from the same initial snapshot holding the same
// ConfState, so no bootstrap protocol is needed. Changing a group's voters
// (moving a copy) is not done yet.
package replica
