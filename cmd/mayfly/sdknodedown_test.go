package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10"
)

// TestSDKWritesWithANodeDown: three processes, one killed; a Couchbase
// SDK (gocbcore, as gocb uses it) connected to a survivor's KV port writes
// keys of every partition, each acknowledged within a minute of retries,
// once the survivors elected their new leaders (the rev of the
// configuration moved and the SDK took it). Before, the configuration
// listed the dead node with no KV port: gocbcore left it out of its list
// of KV servers, and every partition of the nodes after it went to the
// wrong server or to none, its operations timing out for as long as the
// node was down.
func TestSDKWritesWithANodeDown(t *testing.T) {
	nodes, peers := startedKVCluster(t)
	placedAndLed(t, nodes, peers)

	nodes[0].kill()
	eventuallyT(t, nodes[0].name+"'s lease expired", func() error {
		st, err := clusterStatus(peers)
		if err != nil {
			return err
		}
		if ns, ok := st.Node(nodes[0].name); !ok || ns.Up {
			return fmt.Errorf("%s still up: %+v", nodes[0].name, ns)
		}
		return nil
	})

	agent, err := gocbcore.CreateAgent(&gocbcore.AgentConfig{
		BucketName:     "default",
		SeedConfig:     gocbcore.SeedConfig{MemdAddrs: []string{nodes[1].kv}},
		SecurityConfig: gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: "Administrator", Password: "password"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(time.Now().Add(time.Minute), gocbcore.WaitUntilReadyOptions{DesiredState: gocbcore.ClusterStateDegraded, ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService}},
		func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-ready; err != nil {
		t.Fatalf("the SDK never got ready on %s: %v", nodes[1].name, err)
	}
	set := func(key string) error {
		done := make(chan error, 1)
		if _, err := agent.Set(gocbcore.SetOptions{Key: []byte(key), Value: []byte(`{"v":1}`), Deadline: time.Now().Add(5 * time.Second)},
			func(_ *gocbcore.StoreResult, err error) { done <- err }); err != nil {
			return err
		}
		return <-done
	}
	var failed []string
	deadline := time.Now().Add(time.Minute) // the elections and the SDK's next configuration take seconds
	for i := range 24 {
		key := fmt.Sprintf("sdk%d", i)
		for {
			err := set(key)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				failed = append(failed, fmt.Sprintf("%s (partition %d): %v", key, partitionOfKey(key), err))
				break
			}
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of 24 writes through the SDK never acknowledged with %s down:\n%s", len(failed), nodes[0].name, strings.Join(failed, "\n"))
	}
}
