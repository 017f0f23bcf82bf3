// Package audit keeps Mayfly's audit trail of settings changes: one JSON
// object per line, appended to a file in the data directory and fsync'd
// before Record returns.
//
//	log, err := audit.Open(filepath.Join(eng.Dir(), audit.FileName))
//	defer log.Close()
//	err = log.Record(ctx, audit.Event{Time: eng.Clock().Now(), Bucket: "default",
//		Setting: "exp_pager_stime", Old: 3600, New: 10, Remote: r.RemoteAddr})
//
// which appends
//
//	{"time":1700000000,"bucket":"default","setting":"exp_pager_stime","old":3600,"new":10,"remote":"127.0.0.1:5555"}
//
// A nil *Log ignores records, so callers need no checks when auditing is off.
package audit
