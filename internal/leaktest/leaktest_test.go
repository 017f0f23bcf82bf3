package leaktest

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Find waits for a goroutine that is ending, and reports one that is not.
func TestFind(t *testing.T) {
	before := goleak.IgnoreCurrent() // TestEtcdStoppingMember's leak, in any order
	done := make(chan struct{})
	go func() {
		time.Sleep(time.Second) // ends later than goleak's own retries look
		close(done)
	}()
	if err := Find(time.Minute, before); err != nil {
		t.Fatalf("a goroutine ending after a second: %v", err)
	}
	<-done

	stop := make(chan struct{})
	go func() { <-stop }()
	err := Find(300*time.Millisecond, before)
	close(stop)
	if err == nil || !strings.Contains(err.Error(), "TestFind") {
		t.Fatalf("a goroutine still running: %v, want goleak's report of it", err)
	}
}
