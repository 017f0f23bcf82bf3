package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// gate is a DeleteGate that refuses while refuse is set.
type gate struct {
	recorder
	refuse error
}

func (g *gate) PrepareDelete(context.Context, *engine.Bucket) error { return g.refuse }

// Every bucket gets a UUID that survives a restart and a settings change
// and that a bucket created again under the same name does not share;
// DeleteBucketUUID deletes only the incarnation named; a DeleteGate's
// refusal deletes nothing.
func TestBucketIncarnations(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, _ := newEngine(t, dir)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	u1 := b.Settings().UUID
	if len(u1) != 32 {
		t.Fatalf("UUID %q, want 32 hexadecimal digits", u1)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.UUID = "x"; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("a change of the UUID: %v, want ErrInvalidSetting", err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.MaxTTL = 60; return nil }); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, eng)
	eng, _ = newEngine(t, dir)
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Settings().UUID; got != u1 {
		t.Fatalf("UUID after a restart %q, want %q", got, u1)
	}

	var calls []string
	g := &gate{recorder: recorder{name: "gate", calls: &calls}, refuse: errors.New("no quorum")}
	if err := eng.Attach(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := eng.DeleteBucket(ctx, "b"); err == nil {
		t.Fatal("a deletion the gate refused went ahead")
	}
	if _, err := eng.Bucket("b"); err != nil {
		t.Fatalf("the refused deletion removed the bucket: %v", err)
	}
	g.refuse = nil
	if err := eng.DeleteBucketUUID(ctx, "b", "another"); !errors.Is(err, engine.ErrBucketNotFound) {
		t.Fatalf("deleting another incarnation: %v, want ErrBucketNotFound", err)
	}
	if err := eng.DeleteBucketUUID(ctx, "b", u1); err != nil {
		t.Fatal(err)
	}
	b, err = eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if b.Settings().UUID == u1 {
		t.Error("the bucket created again has the deleted one's UUID")
	}
	given := engine.NewBucketUUID()
	c, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "c", Type: engine.Ephemeral, UUID: given})
	if err != nil {
		t.Fatal(err)
	}
	if c.Settings().UUID != given {
		t.Errorf("a bucket created with UUID %s has %s", given, c.Settings().UUID)
	}
	closeChecked(t, eng)
}

// peeker is a BucketService that looks the bucket up while it attaches.
type peeker struct {
	eng  *engine.Engine
	seen []error
}

func (p *peeker) AttachBucket(_ context.Context, b *engine.Bucket) error {
	_, err := p.eng.Bucket(b.Name())
	p.seen = append(p.seen, err)
	return nil
}

func (p *peeker) DetachBucket(context.Context, *engine.Bucket, bool) error { return nil }

// A bucket being created is found only once every service attached: no
// request reaches it before a cluster's replication takes its writes.
func TestCreatedBucketHiddenUntilAttached(t *testing.T) {
	ctx := context.Background()
	eng, _ := newEngine(t, t.TempDir())
	p := &peeker{eng: eng}
	if err := eng.Attach(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if len(p.seen) != 1 || !errors.Is(p.seen[0], engine.ErrBucketNotFound) {
		t.Fatalf("lookups during the attach: %v, want ErrBucketNotFound", p.seen)
	}
	if _, err := eng.Bucket("b"); err != nil {
		t.Fatalf("after CreateBucket: %v", err)
	}
	closeChecked(t, eng)
}

// settingsGate is a SettingsGate that records the changes it is asked
// about and refuses while refuse is set.
type settingsGate struct {
	recorder
	refuse error
	asked  []engine.BucketSettings
}

func (g *settingsGate) PrepareSettings(_ context.Context, _ *engine.Bucket, _, updated engine.BucketSettings) error {
	g.asked = append(g.asked, updated)
	return g.refuse
}

// A SettingsGate's refusal changes nothing (a cluster node whose change
// the cluster did not take keeps the settings every node has), a restart
// with a new evictionPolicy included; what it accepts is made, and a change
// to the same settings does not ask it.
func TestSettingsGate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, _ := newEngine(t, dir)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	g := &settingsGate{recorder: recorder{name: "gate", calls: &calls}, refuse: errors.New("no quorum")}
	if err := eng.Attach(ctx, g); err != nil {
		t.Fatal(err)
	}
	told := 0
	stop := b.WatchSettings(func(_, _ engine.BucketSettings) { told++ })
	defer stop()
	before := b.Settings()
	for _, change := range []func(*engine.BucketSettings){
		func(s *engine.BucketSettings) { s.MaxTTL = 60 },
		func(s *engine.BucketSettings) { s.EvictionPolicy = engine.FullEviction },
	} {
		if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { change(s); return nil }); err == nil {
			t.Fatal("a change the gate refused was made")
		}
		if got := b.Settings(); got != before {
			t.Fatalf("after a refused change: %+v, want %+v", got, before)
		}
	}
	if told != 0 || len(g.asked) != 2 {
		t.Fatalf("watchers told %d times, the gate asked %d times; want 0 and 2", told, len(g.asked))
	}
	if _, _, err := b.UpdateSettings(ctx, func(*engine.BucketSettings) error { return nil }); err != nil || len(g.asked) != 2 {
		t.Fatalf("an unchanged update: %v, gate asked %d times, want 2", err, len(g.asked))
	}
	g.refuse = nil
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.MaxTTL = 60; return nil }); err != nil {
		t.Fatal(err)
	}
	if b.Settings().MaxTTL != 60 || told == 0 || g.asked[2].MaxTTL != 60 {
		t.Fatalf("an accepted change: %+v, told %d, asked %+v", b.Settings(), told, g.asked)
	}
	closeChecked(t, eng)
	eng, _ = newEngine(t, dir)
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Settings(); s.MaxTTL != 60 || s.EvictionPolicy != before.EvictionPolicy {
		t.Fatalf("after a restart: %+v", s)
	}
	closeChecked(t, eng)
}

// peekNew is a BucketService that, while a bucket attaches, records
// whether a lookup by name already finds that very bucket.
type peekNew struct {
	eng   *engine.Engine
	found []bool
}

func (p *peekNew) AttachBucket(_ context.Context, b *engine.Bucket) error {
	got, err := p.eng.Bucket(b.Name())
	p.found = append(p.found, err == nil && got == b)
	return nil
}

func (p *peekNew) DetachBucket(context.Context, *engine.Bucket, bool) error { return nil }

// A bucket restarted for a new evictionPolicy is found under its name only
// once every service attached to the new one, as a created bucket is: no
// write reaches it before a cluster's replication takes its writes.
func TestRestartedBucketHiddenUntilAttached(t *testing.T) {
	ctx := context.Background()
	eng, _ := newEngine(t, t.TempDir())
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	p := &peekNew{eng: eng}
	if err := eng.Attach(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error {
		s.EvictionPolicy = engine.FullEviction
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	nb := b.Reopened()
	if nb == nil || nb == b {
		t.Fatalf("no new bucket after the restart")
	}
	if len(p.found) != 2 || !p.found[0] || p.found[1] {
		t.Fatalf("the bucket found by its name while it attached (at Attach, then at the restart): %v, want [true false]", p.found)
	}
	if got, err := eng.Bucket("b"); err != nil || got != nb {
		t.Fatalf("after the restart: %v, %v", got, err)
	}
	closeChecked(t, eng)
}
