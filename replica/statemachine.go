package replica

import "context"

// StateMachine is what a group replicates into: the document engine's
// partition in step 2b, a key-value map in the tests. Its methods are
// called from the Host's worker goroutine only, one group at a time.
type StateMachine interface {
	// Apply applies committed entries, in log order, and returns one
	// result per entry (what Propose hands back to the proposer: a CAS, a
	// sequence number, an application error such as a CAS mismatch). It
	// writes its durable changes through w, which is committed and synced
	// in the same batch as the group's Raft state and applied index: after
	// a crash the store holds either all of a round or none of it. An
	// error stops the Host (the store can no longer be trusted); an
	// application-level failure of one mutation is a result, not an error.
	Apply(w Writer, entries []Entry) ([]any, error)

	// Snapshot returns the state machine's whole state as of the last
	// applied entry, for the Host to send to a replica that fell behind
	// the log's compacted prefix.
	Snapshot() ([]byte, error)

	// Restore replaces the state machine's state with a snapshot's data,
	// writing it through w (Writer.Clear first drops the old state).
	Restore(w Writer, data []byte) error
}

// Entry is one committed mutation handed to StateMachine.Apply.
type Entry struct {
	// Index is the entry's position in the group's log (the same on every
	// replica).
	Index uint64
	// Term is the Raft term in which it was proposed.
	Term uint64
	// Data is the opaque mutation given to Propose.
	Data []byte
}

// Writer writes a state machine's durable data into the Host's store, in
// the batch of the current round. Keys are the state machine's own: the
// Host keeps each group's keys apart. Keys and values are copied.
type Writer interface {
	// Set stores value under key.
	Set(key, value []byte) error
	// Delete removes key.
	Delete(key []byte) error
	// Clear removes every key of the group's state machine (for Restore).
	Clear() error
}

// Result is what Propose returns once the mutation is applied here.
type Result struct {
	// Index is the mutation's log index.
	Index uint64
	// Value is what the state machine's Apply returned for it.
	Value any
}

// DurableMachine is a StateMachine that keeps what it applies in a store
// of its own, committed after Apply returns (the document engine's group
// commits) rather than through Writer in the round's batch: the group's
// log is the durable copy of an applied entry until the machine's store
// holds it. The Host therefore restarts such a group from the machine's
// durable position, not from its stored applied index, replaying the
// entries committed after it (Apply must ignore an entry it holds
// already), and syncs the machine before it snapshots it, so a snapshot
// (and the log compaction behind it) never passes what the machine holds
// durably.
type DurableMachine interface {
	StateMachine
	// Durable returns the log index up to which the machine's store holds
	// every entry it applied (entries it applied that changed nothing
	// count or not: they are replayed and change nothing again).
	Durable() uint64
	// Sync makes every entry applied so far durable in the machine's
	// store.
	Sync(ctx context.Context) error
}
