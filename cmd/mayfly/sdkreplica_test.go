package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
)

// TestSDKReplicaReadsAndObserve: three processes, the default bucket with
// three copies of every partition. A Couchbase SDK (gocbcore, as gocb
// uses it) reads every key from its active copy and from both replicas
// (GET_REPLICA, replica indexes 1 and 2: gocb's GetAllReplicas gets three
// results), and its legacy durability's poll (OBSERVE_SEQNO on the active
// and each replica, as gocb's PersistTo/ReplicateTo sends it) sees the
// write's sequence number current on all three copies and persisted. Then
// the node leading some keys' partitions is killed: their replicas still
// answer GET_REPLICA (gocb's GetAnyReplica). Before, GET_REPLICA and
// OBSERVE_SEQNO were UNKNOWN_COMMAND everywhere: GetAllReplicas saw one
// copy, GetAnyReplica failed with the leader down, and a PersistTo write
// ended in an ambiguous timeout.
//
// Sub-document lookups likewise, as gocb's LookupInAllReplicas and
// LookupInAnyReplica send them: the bucket offers them
// ("subdoc.ReplicaRead", without which gocb refuses both), a lookup on
// the active copy and replica-flagged ones on replica indexes 1 and 2
// each return the document's paths, and with the leader killed a
// replica answers. Before, gocb refused them (ErrFeatureNotAvailable),
// and a replica-flagged lookup sent to a replica was refused
// NOT_MY_VBUCKET.
func TestSDKReplicaReadsAndObserve(t *testing.T) {
	nodes, peers := startedKVCluster(t)
	m := placedAndLed(t, nodes, peers)
	if m.Copies != 3 {
		t.Fatalf("the default bucket has %d copies of each partition; the test wants 3", m.Copies)
	}

	agent, err := gocbcore.CreateAgent(&gocbcore.AgentConfig{
		BucketName:     "default",
		SeedConfig:     gocbcore.SeedConfig{MemdAddrs: []string{nodes[1].kv, nodes[2].kv}},
		SecurityConfig: gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: "Administrator", Password: "password"}},
		IoConfig:       gocbcore.IoConfig{UseMutationTokens: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(time.Now().Add(time.Minute), gocbcore.WaitUntilReadyOptions{ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService}},
		func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-ready; err != nil {
		t.Fatalf("the SDK never got ready: %v", err)
	}

	set := func(key, value string) (gocbcore.MutationToken, error) {
		type res struct {
			mt  gocbcore.MutationToken
			err error
		}
		done := make(chan res, 1)
		if _, err := agent.Set(gocbcore.SetOptions{Key: []byte(key), Value: []byte(value), Deadline: time.Now().Add(30 * time.Second)},
			func(r *gocbcore.StoreResult, err error) {
				if err != nil {
					done <- res{err: err}
					return
				}
				done <- res{mt: r.MutationToken}
			}); err != nil {
			return gocbcore.MutationToken{}, err
		}
		r := <-done
		return r.mt, r.err
	}
	// replica reads copy idx of key (0: the active copy, with GET).
	replica := func(key string, idx int, d time.Duration) (string, error) {
		type res struct {
			v   string
			err error
		}
		done := make(chan res, 1)
		var err error
		if idx == 0 {
			_, err = agent.Get(gocbcore.GetOptions{Key: []byte(key), Deadline: time.Now().Add(d)}, func(r *gocbcore.GetResult, err error) {
				if err != nil {
					done <- res{err: err}
					return
				}
				done <- res{v: string(r.Value)}
			})
		} else {
			_, err = agent.GetOneReplica(gocbcore.GetOneReplicaOptions{Key: []byte(key), ReplicaIdx: idx, Deadline: time.Now().Add(d)}, func(r *gocbcore.GetReplicaResult, err error) {
				if err != nil {
					done <- res{err: err}
					return
				}
				done <- res{v: string(r.Value)}
			})
		}
		if err != nil {
			return "", err
		}
		r := <-done
		return r.v, r.err
	}
	// lookup is the sub-document lookup of copy idx of key that gocb's
	// LookupInAllReplicas and LookupInAnyReplica send (0: the active
	// copy, unflagged; a replica's flagged as a replica read): the
	// field v and the whole document.
	lookup := func(key string, idx int, d time.Duration) (string, error) {
		type res struct {
			v   string
			err error
		}
		done := make(chan res, 1)
		var flags memd.SubdocDocFlag
		if idx > 0 {
			flags = memd.SubdocDocFlagReplicaRead
		}
		ops := []gocbcore.SubDocOp{{Op: memd.SubDocOpGet, Path: "v"}, {Op: memd.SubDocOpGetDoc}}
		if _, err := agent.LookupIn(gocbcore.LookupInOptions{Key: []byte(key), Ops: ops, Flags: flags, ReplicaIdx: idx, Deadline: time.Now().Add(d)},
			func(r *gocbcore.LookupInResult, err error) {
				switch {
				case err != nil:
					done <- res{err: err}
				case len(r.Ops) != 2 || r.Ops[0].Err != nil || r.Ops[1].Err != nil:
					done <- res{err: fmt.Errorf("lookup of %s on copy %d: %+v", key, idx, r.Ops)}
				default:
					done <- res{v: string(r.Ops[0].Value) + " " + string(r.Ops[1].Value)}
				}
			}); err != nil {
			return "", err
		}
		r := <-done
		return r.v, r.err
	}
	// gocb's LookupInAnyReplica and LookupInAllReplicas send nothing to
	// a bucket that does not offer sub-document replica reads.
	eventuallyT(t, "the bucket offering sub-document replica reads", func() error {
		if st := agent.Internal().BucketCapabilityStatus(gocbcore.BucketCapabilityReplicaRead); st != gocbcore.CapabilityStatusSupported {
			return fmt.Errorf("subdoc.ReplicaRead: status %d", st)
		}
		return nil
	})
	// observe is one OBSERVE_SEQNO of copy idx of mt's partition.
	observe := func(mt gocbcore.MutationToken, idx int) (*gocbcore.ObserveVbResult, error) {
		type res struct {
			r   *gocbcore.ObserveVbResult
			err error
		}
		done := make(chan res, 1)
		if _, err := agent.ObserveVb(gocbcore.ObserveVbOptions{VbID: mt.VbID, VbUUID: mt.VbUUID, ReplicaIdx: idx, Deadline: time.Now().Add(10 * time.Second)},
			func(r *gocbcore.ObserveVbResult, err error) { done <- res{r, err} }); err != nil {
			return nil, err
		}
		r := <-done
		return r.r, r.err
	}

	const keys = 12
	tokens := make([]gocbcore.MutationToken, keys)
	for i := range keys {
		key := fmt.Sprintf("rep%d", i)
		mt, err := set(key, fmt.Sprintf(`{"v":%d}`, i))
		if err != nil {
			t.Fatalf("set %s: %v", key, err)
		}
		if mt.SeqNo == 0 {
			t.Fatalf("set %s: no mutation token", key)
		}
		tokens[i] = mt
	}
	for i := range keys {
		key, want := fmt.Sprintf("rep%d", i), fmt.Sprintf(`{"v":%d}`, i)
		// All three copies, as GetAllReplicas reads them; a replica
		// applies the write a moment after the leader acknowledged it.
		for idx := range 3 {
			eventuallyT(t, fmt.Sprintf("%s read from copy %d", key, idx), func() error {
				v, err := replica(key, idx, 10*time.Second)
				if err != nil {
					return err
				}
				if v != want {
					return fmt.Errorf("copy %d of %s holds %s, want %s", idx, key, v, want)
				}
				return nil
			})
		}
		// LookupInAllReplicas: the paths of all three copies.
		wantPaths := fmt.Sprintf(`%d %s`, i, want)
		for idx := range 3 {
			eventuallyT(t, fmt.Sprintf("%s looked up in copy %d", key, idx), func() error {
				v, err := lookup(key, idx, 10*time.Second)
				if err != nil {
					return err
				}
				if v != wantPaths {
					return fmt.Errorf("copy %d of %s: paths %s, want %s", idx, key, v, wantPaths)
				}
				return nil
			})
		}
		// The legacy durability's poll: current on every copy, persisted
		// on at least the one PersistTo: 1 needs (here, on all).
		for idx := range 3 {
			eventuallyT(t, fmt.Sprintf("%s observed current and persisted on copy %d", key, idx), func() error {
				r, err := observe(tokens[i], idx)
				if err != nil {
					return err
				}
				if r.VbID != tokens[i].VbID || r.CurrentSeqNo < tokens[i].SeqNo || r.PersistSeqNo < tokens[i].SeqNo {
					return fmt.Errorf("copy %d of partition %d: current %d persisted %d, the write's %d", idx, r.VbID, r.CurrentSeqNo, r.PersistSeqNo, tokens[i].SeqNo)
				}
				return nil
			})
		}
	}

	// Kill the node leading the partitions of some keys: their replicas
	// answer replica reads while it is down.
	var led []string
	for i := range keys {
		key := fmt.Sprintf("rep%d", i)
		if m.Partitions[partitionOfKey(key)].Leader == nodes[0].name {
			led = append(led, key)
		}
	}
	if len(led) == 0 {
		t.Fatalf("no key of %d in a partition %s leads", keys, nodes[0].name)
	}
	nodes[0].kill()
	for _, key := range led {
		eventuallyT(t, key+" read from a replica with its leader down", func() error {
			// GetAnyReplica: any copy that answers.
			var errs []error
			for idx := 1; idx < 3; idx++ {
				_, err := replica(key, idx, 5*time.Second)
				if err == nil {
					return nil
				}
				errs = append(errs, err)
			}
			return fmt.Errorf("no replica answered: %v", errs)
		})
		eventuallyT(t, key+" looked up in a replica with its leader down", func() error {
			// LookupInAnyReplica: any copy that answers.
			var errs []error
			for idx := 1; idx < 3; idx++ {
				_, err := lookup(key, idx, 5*time.Second)
				if err == nil {
					return nil
				}
				errs = append(errs, err)
			}
			return fmt.Errorf("no replica answered the lookup: %v", errs)
		})
	}
}
