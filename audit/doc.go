// Package audit keeps Mayfly's audit trail of administrative actions: one
// JSON object per line, appended to a file in the data directory, fsync'd
// before Record returns, and hash-chained so that a removed, edited or
// reordered line is found by Verify.
//
//	log, err := audit.Open(filepath.Join(eng.Dir(), audit.FileName))
//	defer log.Close()
//	err = log.Record(ctx, audit.Event{Time: eng.Clock().Now(), Remote: r.RemoteAddr,
//		Action: audit.ActionPagerSettings, Bucket: "default",
//		Before: map[string]int64{"exp_pager_stime": 3600}, After: map[string]int64{"exp_pager_stime": 10}})
//
// appends
//
//	{"seq":1,"prev":"149f6022…","time":1700000000,"user":"","remote":"127.0.0.1:5555","action":"pager.settings","bucket":"default","target":"","before":{"exp_pager_stime":3600},"after":{"exp_pager_stime":10}}
//
// # The chain
//
// Every line carries seq, its 1-based line number in the file, and prev, the
// hex SHA-256 of the previous line's bytes (without its newline). The first
// line's prev is the SHA-256 of the fixed string Genesis. A line carries no
// hash of itself: the next line's prev covers it. So removing a line, editing
// one (anything but the last), or swapping two breaks the chain at the first
// line that follows, and Verify names that line.
//
// What the chain cannot show: the loss of the last lines (truncation), an edit
// of the very last line, or a rewrite of the whole tail by someone who
// recomputes every hash after the edit — there is no secret. Report.Head, the
// hash of the last line, lets an operator anchor the log elsewhere (a ticket,
// another machine) and later check that the log still continues from it.
//
// # Crashes: a torn last line
//
// Records are written with one write each and fsync'd, so a crash can leave
// at most a partial last line, without its newline. Open never rewrites or
// truncates what is in the file; it seals the torn line with a newline and
// appends a marker record, action "audit.torn":
//
//   - if the unterminated line is nevertheless a whole record that continues
//     the chain (only its newline was lost), it stays in the chain, and the
//     marker's after is {"unterminated": SEQ};
//   - otherwise the lines after the last record of the chain (the torn
//     bytes, and any fragment of an earlier interrupted seal) are skipped:
//     the marker's prev is the hash of that last record, and its after is
//     {"skipped_lines": K, "skipped_bytes": N, "skipped_sha256": HEX}, the
//     hash of the skipped bytes newlines included. Verify accepts skipped
//     lines only when such a marker right after them vouches for exactly
//     them, and only if none of them is a record (a crash leaves fragments,
//     never a whole record out of the chain).
//
// To seal, Open follows the chain through the whole file; if it is broken
// before the torn line (a removed or edited line), Open refuses the file with
// ErrCorrupt rather than vouch for the damage. On a file that ends whole,
// Open reads only the last line.
//
// Open reports what it sealed through Log.Torn. Because callers record the
// intent before acting (see Log.Intend) and act only once Record returned
// nil, a torn record is never the record of an action that was done.
//
// A whole last line that is not a record cannot come from a crash: Open
// refuses such a file with ErrCorrupt rather than continue a chain from it.
//
// # Failures
//
// A write or fsync error leaves the file in an unknown state (perhaps a
// partial line), so the Log refuses every later Record with an error wrapping
// ErrBroken; the next Open seals the damage as above. Callers must refuse the
// action whose record failed.
//
// A nil *Log ignores records, so callers need no checks when auditing is off.
package audit
