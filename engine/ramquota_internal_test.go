package engine

import (
	"context"
	"errors"
	"testing"
)

// A ramQuotaMB whose bytes overflow int64 is refused (Validate), and one an
// earlier release stored (it read as a negative quota, so the bucket ejected
// every value it could and Go's memory limit went with it) opens as the
// largest quota instead.
func TestRAMQuotaCapped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := Open(dir, &Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []int64{MaxRAMQuotaMB + 1, 8796093022208, 1 << 62} {
		if _, err := eng.CreateBucket(ctx, BucketSettings{Name: "over", RAMQuotaMB: q}); !errors.Is(err, ErrInvalidSetting) {
			t.Errorf("CreateBucket with ramQuotaMB %d: %v, want ErrInvalidSetting", q, err)
		}
	}
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", RAMQuotaMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *BucketSettings) error { s.RAMQuotaMB = 8796093022208; return nil }); !errors.Is(err, ErrInvalidSetting) {
		t.Errorf("UpdateSettings to ramQuotaMB 8796093022208: %v, want ErrInvalidSetting", err)
	}
	// What an earlier release stored for ramQuota=8796093022208.
	b.ddl.Lock()
	ce, err := b.catalogCopy()
	if err == nil {
		ce.Settings.RAMQuotaMB = 8796093022208
		err = eng.putCatalog(ce)
	}
	b.ddl.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err = Open(dir, &Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Settings().RAMQuotaMB; got != MaxRAMQuotaMB {
		t.Errorf("reopened with a stored ramQuotaMB of 8796093022208: %d, want %d", got, MaxRAMQuotaMB)
	}
	if q := b.mem.quota.Load(); q <= 0 {
		t.Errorf("the memory owner's quota: %d bytes, want positive", q)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *BucketSettings) error { s.MaxTTL = 5; return nil }); err != nil {
		t.Errorf("an edit of another setting after the reopen: %v", err)
	}
}
