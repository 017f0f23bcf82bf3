package engine
import ("context";"fmt";"testing";"os";"runtime";"runtime/pprof")
func TestZZHeap(t *testing.T){
	runtime.MemProfileRate = 512
	ctx := context.Background()
	eng, _ := Open(t.TempDir(), &Options{Clock: NewFakeClock(1700000000), NoSync: true})
	bk, _ := eng.CreateBucket(ctx, BucketSettings{Name: "heap", Type: Couchbase, RAMQuotaMB: 1024})
	c := bk.DefaultCollection()
	value := []byte(`{"type":"t3","n":123,"v":4.5}`)
	const N = 100000
	for i := range N { c.Upsert(ctx, fmt.Sprintf("k%07d", i), value, nil) }
	runtime.GC(); runtime.GC()
	f, _ := os.Create("/tmp/lean-heap.prof"); pprof.WriteHeapProfile(f); f.Close()
	eng.Close()
}
