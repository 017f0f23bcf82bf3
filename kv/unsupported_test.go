package kv_test

import (
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
)

// Commands Mayfly does not serve (DCP, range scans) are
// UNKNOWN_COMMAND with a reason, before and after a bucket is selected,
// and the connection goes on: the SDK raises its unsupported-operation
// error instead of timing out.
func TestUnsupportedCommands(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.hello(memd.FeatureXerror, memd.FeatureCollections)
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + adminUser + "\x00" + adminPass)}, memd.StatusSuccess)
	cmds := []memd.CmdCode{
		memd.CmdDcpOpenConnection, memd.CmdDcpAddStream, memd.CmdDcpCloseStream, memd.CmdDcpStreamReq,
		memd.CmdDcpGetFailoverLog, memd.CmdDcpControl, memd.CmdDcpNoop, memd.CmdDcpBufferAck,
		memd.CmdRangeScanCreate, memd.CmdRangeScanContinue, memd.CmdRangeScanCancel, memd.CmdGetRandom,
	}
	for round := range 2 {
		for _, cmd := range cmds {
			r := c.expect(&memd.Packet{Command: cmd, Key: []byte("k"), Extras: make([]byte, 8), Value: []byte("v")}, memd.StatusUnknownCommand)
			if !strings.Contains(string(r.Value), "not supported by Mayfly") {
				t.Fatalf("%v: reason %s", cmd, r.Value)
			}
		}
		if round == 0 {
			c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
		}
	}
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}
