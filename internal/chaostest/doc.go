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
//   - isolate, isolate4: no kills; a real network partition. Every node
//     runs in a network namespace of its own (`ip netns`, a veth pair to
//     the root namespace, which routes between them; the harness, there,
//     reaches every node), and the cut is a pair of blackhole routing
//     rules per link (`ip rule ... iif VETH to ADDR blackhole`): all of
//     the victim's traffic with the others, etcd's included, dropped both
//     ways, connections left open. From the middle of the load one node is
//     cut off for min(30 s, MAYFLY_CHAOS/3), longer than the failover
//     timeout set (min(10 s, a third of the cut)), so it loses its lease
//     and is failed over during the cut: on three nodes (isolate) the
//     victim is etcd's leader, and stays a degraded voter; on four
//     (isolate4) it is the node leading the most partitions, and a spare
//     replaces it in each, by conf changes it never receives. Beyond the
//     register and partition checks: the failover happened during the
//     cut; after the heal every partition has its voters again, nothing
//     lagging, within 3 minutes (timed); the victim's catch-up is timed
//     from its Raft groups' own progress too (the chaos build's GET
//     /_chaos/progress/BUCKET on each node: until the victim applied, in
//     each partition it follows, what the majority had committed at the
//     heal), beside the lag reports read through the majority's etcd
//     members, and the time its own etcd member takes to answer again; on four nodes the victim left the
//     groups it was replaced in and dropped their documents, without a
//     restart. Reads through the victim during the cut are counted
//     (answered ones are in the linearizability check). Needs root (the
//     namespaces are named mfiso*, removed at the end); skipped otherwise.
//   - figures: no kills; the same load against one `mayfly serve` without
//     --peers and the three nodes, in alternating phases of a quarter each:
//     operations and acknowledged writes per second, and view query p50/p99.
package chaostest
