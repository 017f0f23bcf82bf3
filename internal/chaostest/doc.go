// Package chaostest is Mayfly's cluster chaos test (`make chaos`). It holds
// no library code: the harness lives in its test files and drives three
// real `mayfly serve --peers` processes on loopback only through their
// public surface (HTTP and the memcached port).
//
// TestChaos, run only when MAYFLY_CHAOS names a duration, puts clients on
// random nodes doing upserts, reads, CAS replaces, deletes and writes with
// a (long) expiry on a small key space, records every operation with its
// call and return times and outcome, and every ~20 s kills a node with
// SIGKILL, restarting it a few seconds later. At the end it reads every key
// through every node and asserts that no acknowledged write was lost and
// that the history, per key, is linearizable (checked with porcupine
// against a register model with CAS and delete); it logs throughput, write
// latencies during the kill windows and each restarted node's catch-up
// time.
package chaostest
