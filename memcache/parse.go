package memcache

import (
	"bytes"
	"math"
	"unicode/utf8"
)

// cmdKind names a text-protocol command.
type cmdKind uint8

const (
	cmdInvalid cmdKind = iota // the line is rejected; command.reply says how
	cmdGet
	cmdGets
	cmdGat
	cmdGats
	cmdSet
	cmdAdd
	cmdReplace
	cmdAppend
	cmdPrepend
	cmdCas
	cmdTouch
	cmdDelete
	cmdIncr
	cmdDecr
	cmdFlushAll
	cmdStats
	cmdVersion
	cmdVerbosity
	cmdQuit
	cmdForwarded // mayfly_forwarded: the connection is another node's (forward.go)
	// cmdMetaSet is memcached 1.6's meta set, "ms <key> <datalen> <flags>*":
	// not served (answered ERROR), but its data block is read past, never
	// run as a command.
	cmdMetaSet
)

// String returns the command's name.
func (k cmdKind) String() string {
	switch k {
	case cmdGet:
		return "get"
	case cmdGets:
		return "gets"
	case cmdGat:
		return "gat"
	case cmdGats:
		return "gats"
	case cmdSet:
		return "set"
	case cmdAdd:
		return "add"
	case cmdReplace:
		return "replace"
	case cmdAppend:
		return "append"
	case cmdPrepend:
		return "prepend"
	case cmdCas:
		return "cas"
	case cmdTouch:
		return "touch"
	case cmdDelete:
		return "delete"
	case cmdIncr:
		return "incr"
	case cmdDecr:
		return "decr"
	case cmdFlushAll:
		return "flush_all"
	case cmdStats:
		return "stats"
	case cmdVersion:
		return "version"
	case cmdVerbosity:
		return "verbosity"
	case cmdQuit:
		return "quit"
	case cmdForwarded:
		return forwardHello
	case cmdMetaSet:
		return "ms"
	}
	return "invalid"
}

// isStorage reports whether the command is followed by a data block.
func (k cmdKind) isStorage() bool { return k >= cmdSet && k <= cmdCas }

// isRetrieval reports whether the command is of the get family.
func (k cmdKind) isRetrieval() bool { return k >= cmdGet && k <= cmdGats }

// The protocol's limits and replies, as memcached 1.6 has them.
const (
	// maxKeyLen is memcached's KEY_MAX_LENGTH.
	maxKeyLen = 250
	// maxTokens is memcached's MAX_TOKENS: a line splits into at most
	// maxTokens-1 tokens (the rest of a get line is read in further rounds).
	maxTokens = 24
	// maxVlen is the largest data length memcached accepts (INT_MAX - 2).
	maxVlen = math.MaxInt32 - 2
	// maxMetaTokens is memcached's MFLAG_MAX_OPT_LENGTH: a meta command
	// line of more tokens (the terminal one counted) is refused.
	maxMetaTokens = 20

	replyError        = "ERROR"
	replyBadFormat    = "CLIENT_ERROR bad command line format"
	replyBadExptime   = "CLIENT_ERROR invalid exptime argument"
	replyBadDelta     = "CLIENT_ERROR invalid numeric delta argument"
	replyBadDelete    = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"
	replyNoShutdown   = "ERROR: shutdown not enabled"
	replyStatsDetail  = "CLIENT_ERROR usage: stats detail on|off|dump"
	replyBadDataChunk = "CLIENT_ERROR bad data chunk"
	replyMetaFlags    = "CLIENT_ERROR options flags too long"
	replyTooLarge     = "SERVER_ERROR object too large for cache"
	replyNoMemory     = "SERVER_ERROR out of memory storing object"
	// replyLocked answers a write to a document a Couchbase SDK locked
	// (GetAndLock). memcached has no locks; SERVER_ERROR is what every
	// client raises as an error, where EXISTS would send a cas loop
	// round again (gets shows the real CAS) until the lock ends.
	replyLocked        = "SERVER_ERROR locked: the item is locked by a Couchbase client (GetAndLock) until it unlocks or the lock ends"
	replyNonNumeric    = "CLIENT_ERROR cannot increment or decrement non-numeric value"
	replyTooManyConns  = "ERROR Too many open connections"
	replyStored        = "STORED"
	replyNotStored     = "NOT_STORED"
	replyExists        = "EXISTS"
	replyNotFound      = "NOT_FOUND"
	replyDeleted       = "DELETED"
	replyTouched       = "TOUCHED"
	replyOK            = "OK"
	replyEnd           = "END"
	replyReset         = "RESET"
	replyServerErrorSP = "SERVER_ERROR "
)

// Answers to memcached commands the port does not serve.
const (
	// replyNoDump is memcached's answer to "stats cachedump" when started
	// with -X (dump_enabled no, as "stats settings" says here).
	replyNoDump = "CLIENT_ERROR stats cachedump not allowed"
	// replyMemlimit answers cache_memlimit: the memory limit is the
	// bucket's RAM quota, which its settings change.
	replyMemlimit = "CLIENT_ERROR cache_memlimit not supported: set the bucket's ramQuota over the REST API (POST /pools/default/buckets/NAME)"
)

// command is one parsed command line. A rejected line has kind cmdInvalid
// and the reply memcached gives for it.
type command struct {
	kind cmdKind
	// keys are the keys: every key of a get-family command, keys[0] for
	// single-key commands. They alias nothing: each is its own string.
	keys []string
	// flags are the client flags of a storage command.
	flags uint32
	// exptime is the expiry value as the client gave it, truncated to 32 bits
	// as memcached does: storage, touch, gat and gats; the delay of flush_all.
	exptime int64
	// hasDelay says flush_all was given a delay.
	hasDelay bool
	// vlen is the data block length of a storage command, without "\r\n".
	vlen int
	// cas is the cas unique of a cas command.
	cas uint64
	// delta is the amount of incr and decr.
	delta uint64
	// sub is the stats sub-command ("" for general stats).
	sub string
	// noreply suppresses the reply, errors included, as memcached does.
	noreply bool

	// reply is the answer to a rejected line (kind == cmdInvalid), or, for
	// a retrieval, to a bad key after keys: memcached serves the keys before
	// it (counting and touching them), then drops the answer for this reply.
	reply string
	// swallow is how many bytes of data block (including "\r\n") to discard
	// after a rejected storage line; memcached itself never swallows for a bad
	// line, so this is only set for keys Mayfly refuses and memcached would take.
	swallow int
	// close asks to close the connection without a reply.
	close bool
	// countFlush says the line counts in cmd_flush: memcached counts every
	// flush_all it parses, a bad delay included.
	countFlush bool
}

// trimLine removes the line terminator as memcached does: the "\n", then a
// "\r" before it if the line is longer than one byte; and it cuts the line at
// its first NUL byte, where memcached's C string ends.
func trimLine(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n := len(line); n > 1 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	return line
}

// tokenize splits a line on spaces (only spaces, as memcached), dropping
// empty tokens. It appends to dst.
func tokenize(dst [][]byte, line []byte) [][]byte {
	for len(line) > 0 {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			return append(dst, line)
		}
		if i > 0 {
			dst = append(dst, line[:i])
		}
		line = line[i+1:]
	}
	return dst
}

// parseCommand parses one command line (with or without its terminator) the
// way memcached 1.6 does, reply strings included. It never panics.
func parseCommand(line []byte) command { return parseCommandInto(line, nil) }

// parseCommandInto is parseCommand with keys as room for the command's key
// list: the result's keys then share keys's array (valid until it is reused),
// so a connection parses a command without allocating the list each time.
// With nil keys the list is a fresh slice.
func parseCommandInto(line []byte, keys []string) command {
	var buf [maxTokens][]byte
	toks := tokenize(buf[:0], trimLine(line))
	return parseTokens(toks, keys[:0])
}

func invalid(reply string) command { return command{kind: cmdInvalid, reply: reply} }

// parseTokens dispatches on the command name as process_command_ascii does.
// n below is memcached's ntokens: the real tokens plus the terminal one.
// keys is room for the key list (see parseCommandInto).
func parseTokens(toks [][]byte, keys []string) command {
	n := len(toks) + 1
	if n > maxTokens {
		n = maxTokens // memcached's token array is full; only counts matter here
	}
	if len(toks) == 0 || len(toks[0]) < 2 {
		return invalid(replyError)
	}
	name := string(toks[0])
	switch name {
	case "get", "gets", "gat", "gats", "bget":
		if n < 3 {
			return invalid(replyError)
		}
		return parseRetrieval(kindByName(name), toks, keys)
	case "set", "add", "replace", "append", "prepend":
		if n != 6 && n != 7 {
			return invalid(replyError)
		}
		return parseStorage(kindByName(name), toks, n, keys)
	case "cas":
		if n != 7 && n != 8 {
			return invalid(replyError)
		}
		return parseStorage(cmdCas, toks, n, keys)
	case "incr", "decr":
		if n != 4 && n != 5 {
			return invalid(replyError)
		}
		kind := cmdIncr
		if name == "decr" {
			kind = cmdDecr
		}
		return parseArith(kind, toks, n, keys)
	case "touch":
		if n != 4 && n != 5 {
			return invalid(replyError)
		}
		return parseTouch(toks, n, keys)
	case "delete":
		if n < 3 || n > 5 {
			return invalid(replyError)
		}
		return parseDelete(toks, n, keys)
	case "flush_all":
		if n < 2 || n > 4 {
			return invalid(replyError)
		}
		return parseFlushAll(toks, n)
	case "stats":
		return parseStats(toks, n)
	case "version":
		return command{kind: cmdVersion}
	case "quit":
		return command{kind: cmdQuit}
	case forwardHello:
		return command{kind: cmdForwarded}
	case "verbosity":
		if n != 3 && n != 4 {
			return invalid(replyError)
		}
		c := command{kind: cmdVerbosity, noreply: noreplyAt(toks, n)}
		v, ok := safeStrtoul(toks[1])
		if !ok {
			return c.reject(replyBadFormat)
		}
		c.delta = uint64(v)
		return c
	case "shutdown":
		return invalid(replyNoShutdown)
	case "cache_memlimit":
		// memcached's checks (WANT_TOKENS_OR(3, 4), safe_strtoul, then
		// noreply honoured for every answer); a limit it would take is
		// refused, saying where the limit is set.
		if n != 3 && n != 4 {
			return invalid(replyError)
		}
		c := command{kind: cmdInvalid, noreply: noreplyAt(toks, n), reply: replyMemlimit}
		if _, ok := safeStrtoul(toks[1]); !ok {
			c.reply = replyError
		}
		return c
	case "ms":
		if n >= 3 {
			return parseMetaSet(toks, n, keys)
		}
	}
	if bytes.HasPrefix(toks[n-2], []byte("HTTP/")) {
		return command{kind: cmdInvalid, close: true}
	}
	return invalid(replyError)
}

// kindByName maps a command name to its kind; "bget" is memcached's old
// alias of get.
func kindByName(name string) cmdKind {
	if name == "bget" {
		return cmdGet
	}
	for k := cmdGet; k <= cmdQuit; k++ {
		if k.String() == name {
			return k
		}
	}
	return cmdInvalid
}

// reject turns c into a rejected line, keeping its noreply.
func (c command) reject(reply string) command {
	return command{kind: cmdInvalid, reply: reply, noreply: c.noreply}
}

// noreplyAt is memcached's set_noreply_maybe: the last token counted in n is
// "noreply".
func noreplyAt(toks [][]byte, n int) bool {
	i := n - 2
	return i >= 0 && i < len(toks) && string(toks[i]) == "noreply"
}

// keyOK reports whether memcached takes the key: at most 250 bytes.
func keyOK(k []byte) bool { return len(k) <= maxKeyLen }

// keyStorable reports whether Mayfly can store the key: valid UTF-8 (a
// document ID) without control characters, as the protocol text asks.
// memcached itself accepts any bytes but space and newline.
func keyStorable(k []byte) bool {
	for _, c := range k {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(k)
}

func parseRetrieval(kind cmdKind, toks [][]byte, room []string) command {
	c := command{kind: kind}
	keys := toks[1:]
	if kind == cmdGat || kind == cmdGats {
		e, ok := safeStrtol(toks[1])
		if !ok {
			return invalid(replyBadExptime)
		}
		c.exptime = int64(e)
		keys = toks[2:]
	}
	c.keys = room
	if c.keys == nil || cap(c.keys) < len(keys) {
		c.keys = make([]string, 0, len(keys))
	}
	for _, k := range keys {
		if !keyOK(k) || !keyStorable(k) {
			c.reply = replyBadFormat
			break
		}
		c.keys = append(c.keys, string(k))
	}
	return c
}

func parseStorage(kind cmdKind, toks [][]byte, n int, room []string) command {
	c := command{kind: kind, noreply: noreplyAt(toks, n)}
	key := toks[1]
	if !keyOK(key) {
		return c.reject(replyBadFormat)
	}
	flags, ok1 := safeStrtoul(toks[2])
	exp, ok2 := safeStrtol(toks[3])
	vlen, ok3 := safeStrtol(toks[4])
	if !ok1 || !ok2 || !ok3 {
		return c.reject(replyBadFormat)
	}
	if kind == cmdCas {
		cas, ok := safeStrtoull(toks[5])
		if !ok {
			return c.reject(replyBadFormat)
		}
		c.cas = cas
	}
	if vlen < 0 || int64(vlen) > maxVlen {
		return c.reject(replyBadFormat)
	}
	c.flags, c.exptime, c.vlen = flags, int64(exp), int(vlen)
	if !keyStorable(key) {
		r := c.reject(replyBadFormat)
		r.swallow = c.vlen + 2
		return r
	}
	c.keys = append(room, string(key))
	return c
}

// parseMetaSet reads an "ms" line as memcached 1.6.18 does before it
// reads the data block: the lines it refuses without reading the block
// (a key over 250 bytes, no datalen, too many flags, a bad datalen) get its
// replies; any other line is a cmdMetaSet whose block (datalen bytes and
// "\r\n") is read past, as memcached reads it even for an invalid flag.
func parseMetaSet(toks [][]byte, n int, room []string) command {
	if !keyOK(toks[1]) || n == 3 {
		return invalid(replyBadFormat)
	}
	if n > maxMetaTokens {
		return invalid(replyMetaFlags)
	}
	vlen, ok := safeStrtol(toks[2])
	if !ok || vlen < 0 || int64(vlen) > maxVlen {
		return invalid(replyBadFormat)
	}
	return command{kind: cmdMetaSet, vlen: int(vlen), keys: append(room, string(toks[1]))}
}

func parseArith(kind cmdKind, toks [][]byte, n int, room []string) command {
	c := command{kind: kind, noreply: noreplyAt(toks, n)}
	if !keyOK(toks[1]) || !keyStorable(toks[1]) {
		return c.reject(replyBadFormat)
	}
	d, ok := safeStrtoull(toks[2])
	if !ok {
		return c.reject(replyBadDelta)
	}
	c.delta = d
	c.keys = append(room, string(toks[1]))
	return c
}

func parseTouch(toks [][]byte, n int, room []string) command {
	c := command{kind: cmdTouch, noreply: noreplyAt(toks, n)}
	if !keyOK(toks[1]) || !keyStorable(toks[1]) {
		return c.reject(replyBadFormat)
	}
	e, ok := safeStrtol(toks[2])
	if !ok {
		return c.reject(replyBadExptime)
	}
	c.exptime = int64(e)
	c.keys = append(room, string(toks[1]))
	return c
}

func parseDelete(toks [][]byte, n int, room []string) command {
	c := command{kind: cmdDelete}
	if n > 3 {
		holdIsZero := string(toks[2]) == "0"
		c.noreply = noreplyAt(toks, n)
		valid := (n == 4 && (holdIsZero || c.noreply)) || (n == 5 && holdIsZero && c.noreply)
		if !valid {
			return c.reject(replyBadDelete)
		}
	}
	if !keyOK(toks[1]) || !keyStorable(toks[1]) {
		return c.reject(replyBadFormat)
	}
	c.keys = append(room, string(toks[1]))
	return c
}

func parseFlushAll(toks [][]byte, n int) command {
	c := command{kind: cmdFlushAll, noreply: noreplyAt(toks, n), countFlush: true}
	want := 2
	if c.noreply {
		want = 3
	}
	if n != want {
		e, ok := safeStrtol(toks[1])
		if !ok {
			r := c.reject(replyBadExptime)
			r.countFlush = true
			return r
		}
		c.exptime, c.hasDelay = int64(e), true
	}
	return c
}

func parseStats(toks [][]byte, n int) command {
	if n == 2 {
		return command{kind: cmdStats}
	}
	sub := string(toks[1])
	switch sub {
	case "settings", "reset", "items", "slabs", "sizes", "conns", "warmup":
		return command{kind: cmdStats, sub: sub}
	case "cachedump":
		// As memcached -X: refused before its arguments are looked at.
		return invalid(replyNoDump)
	case "detail":
		// Per-prefix stats are not collected: on and off are accepted, and
		// dump lists nothing.
		if n >= 4 {
			switch string(toks[2]) {
			case "on", "off":
				return command{kind: cmdStats, sub: "detail"}
			case "dump":
				return command{kind: cmdStats, sub: "detail dump"}
			}
		}
		return invalid(replyStatsDetail)
	}
	return invalid(replyError)
}

// C-style number parsing, as memcached's safe_strto* functions do it on top
// of strtol/strtoull: leading white space, an optional sign, decimal digits,
// then the end of the token or a white-space character.

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// cStrtoull is strtoull(s, &end, 10) on a token: the value (negated modulo
// 2^64 after a '-', as C does), whether a '-' was seen, how many bytes were
// used, and false for no digits or overflow (ERANGE).
func cStrtoull(s []byte) (v uint64, neg bool, used int, ok bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	overflow := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			overflow = true
		}
		v = v*10 + d
		i++
	}
	if i == start || overflow {
		return 0, neg, 0, false
	}
	if neg {
		v = -v
	}
	return v, neg, i, true
}

// endOK is memcached's check after strto*: the number ends the token or is
// followed by white space.
func endOK(s []byte, used int) bool { return used == len(s) || isCSpace(s[used]) }

// safeStrtoull is memcached's safe_strtoull: a '-' is refused only when the
// result would be negative as a signed number ("-0" is 0; "-1" is refused).
func safeStrtoull(s []byte) (uint64, bool) {
	v, neg, used, ok := cStrtoull(s)
	if !ok || !endOK(s, used) {
		return 0, false
	}
	if int64(v) < 0 && neg {
		return 0, false
	}
	return v, true
}

// safeStrtoul is memcached's safe_strtoul on a 64-bit system: safeStrtoull,
// then truncated to 32 bits (flags of 4294967296 are stored as 0).
func safeStrtoul(s []byte) (uint32, bool) {
	v, ok := safeStrtoull(s)
	return uint32(v), ok
}

// safeStrtol is memcached's safe_strtol: strtol into a 64-bit long (ERANGE
// past int64), then truncated to 32 bits (an exptime of 2147483648 becomes
// -2147483648).
func safeStrtol(s []byte) (int32, bool) {
	v, neg, used, ok := cStrtoull(s)
	if !ok || !endOK(s, used) {
		return 0, false
	}
	// strtol range: [-2^63, 2^63-1].
	if neg {
		if mag := -v; mag > 1<<63 {
			return 0, false
		}
	} else if v > math.MaxInt64 {
		return 0, false
	}
	return int32(int64(v)), true
}

// parseIncrValue reads a stored value as memcached's incr does: strtoull on
// the item data, which ends in "\r\n" (here: the end of the value acts as
// white space), or at a NUL byte. An empty value is not a number.
func parseIncrValue(val []byte) (uint64, bool) {
	if len(val) == 0 {
		return 0, false
	}
	if i := bytes.IndexByte(val, 0); i >= 0 {
		val = val[:i]
	}
	v, neg, used, ok := cStrtoull(val)
	if !ok || !endOK(val, used) {
		return 0, false
	}
	if int64(v) < 0 && neg {
		return 0, false
	}
	return v, true
}
