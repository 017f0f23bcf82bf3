// Package chaostest is Mayfly's cluster chaos test (`make chaos`). It holds
// no library code: the harness lives in its test files and drives real
// `mayfly serve --peers` processes on loopback only through their public
// surface (HTTP, the memcached port, and etcd's client port for the
// cluster's status).
//
// TestChaos runs only when MAYFLY_CHAOS names a duration: each case of
// MAYFLY_CHAOS_CASES (comma-separated; all of them, in this order, when
// unset) runs on three fresh nodes under load for that long.
//
// Every case but figures puts clients on random nodes doing upserts, reads,
// CAS replaces, deletes and writes with a (long) expiry on a small key
// space, records every operation with its call and return times and
// outcome, and (but in the partition case) every ~20 s kills a node with
// SIGKILL, restarting it a few seconds later. At the end it reads every key through every node and
// asserts that no acknowledged write was lost and that the history, per
// key, is linearizable (checked with porcupine against a register model
// with CAS and delete); it logs throughput, write latencies during the
// kill windows and each restarted node's catch-up time. Then:
//
//   - kill: nodes killed in turn, nothing more.
//   - etcd: the node killed is each time the one whose embedded etcd member
//     leads (etcd's maintenance Status); writes must go on being
//     acknowledged while it is down; etcd's re-election and the
//     orchestrator's (the cluster status naming a live one) are timed.
//   - expiry: documents written with 2–6 s expiries across the kills, the
//     harness running every node's expiry pager about every second; at the
//     end a view query with expired=exclude answers identically from every
//     node (as the model of the documents that do not expire), the purges
//     summed over every pager run equal the documents that expired (each
//     purged once), and each reads as missing through every node.
//   - views: a design document (emit([doc.type, doc.n], doc.n), _sum and
//     _count) defined at the start; typed documents written and deleted
//     throughout; stale=ok queries on random nodes never fail (an answer's
//     "errors" entries while a node is down are counted); at the end every
//     node's answers with stale=false (map rows, descending with skip and
//     limit, keys, reduce, group_level, group) equal a model computed from
//     the documents read back.
//   - partition: no kills; from the middle of the load, the node leading
//     the most partitions (about a third) is cut off from both others'
//     Raft traffic for min(30 s, MAYFLY_CHAOS/3), then healed. The harness
//     builds mayfly with -tags chaos, whose --chaos-cut-file (a file naming
//     the peers whose frames a node drops, both ways, connections open) is
//     the fault injection; etcd's traffic is not cut (the node keeps its
//     lease): a Raft-only partition. Beyond the register checks (stale reads
//     included): no write called after the cut took effect is acknowledged
//     through the cut node, before the heal, for a partition it led; writes
//     are acknowledged through the majority; a leader reports the cut node
//     lagging; the catch-up after healing (until no leader reports it
//     lagging, and until nothing lags) is logged.
//   - figures: no kills; the same load against one `mayfly serve` without
//     --peers and the three nodes, in alternating phases of a quarter each:
//     operations and acknowledged writes per second, and view query p50/p99.
package chaostest
