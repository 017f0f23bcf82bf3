package sdktest

import (
	"os"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

func TestMain(m *testing.M) {
	if os.Getenv("GOCB_DEBUG") != "" {
		gocb.SetLogger(gocb.VerboseStdioLogger())
	}
	os.Exit(m.Run())
}

var kvTimeout = func() time.Duration {
	if os.Getenv("GOCB_DEBUG") != "" {
		return 3 * time.Second
	}
	return 30 * time.Second
}()
