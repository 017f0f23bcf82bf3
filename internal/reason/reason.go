// Package reason turns Go errors into the reasons clients are shown: the
// HTTP API's "reason" fields and the memcached protocol's SERVER_ERROR
// lines.
//
// Mayfly's packages prefix their error texts with the package name, as Go
// storage libraries do ("engine: document not found"), which helps in logs
// and in Go callers' messages; a client of the HTTP API or of memcached is
// no Go caller, and is shown the same sentence without those prefixes
// ("document not found: k"). This package is the one place that does it, so
// that an error added later needs nothing to read well. Cap bounds text a
// client sent (a user name, a path) where a log line or an answer shows it.
package reason

import (
	"strings"
	"unicode/utf8"
)

// prefixes are the error prefixes of Mayfly's packages and of the standard
// library's JSON decoder.
var prefixes = [...]string{
	"engine: ", "jsruntime: ", "views: ", "index: ", "search: ", "pager: ",
	"auth: ", "audit: ", "httpapi: ", "memcache: ", "changes: ", "cluster: ", "json: ",
}

// Of is err's text as a client sees it (see Strip); "" for nil.
func Of(err error) string {
	if err == nil {
		return ""
	}
	return Strip(err.Error())
}

// Strip removes the package prefixes at the start of msg and at the start of
// every part of a chain of wrapped errors, which follows ": ":
//
//	"engine: create bucket b: engine: invalid setting: maxTTL: must be ..."
//	becomes "create bucket b: invalid setting: maxTTL: must be ...".
//
// Text inside a part is left alone.
func Strip(msg string) string {
	if !hasPrefixAnywhere(msg) {
		return msg
	}
	var b strings.Builder
	b.Grow(len(msg))
	for {
		msg = trimPrefixes(msg)
		i := strings.Index(msg, ": ")
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i+2])
		msg = msg[i+2:]
	}
}

// hasPrefixAnywhere says whether msg holds a prefix Strip removes.
func hasPrefixAnywhere(msg string) bool {
	for _, p := range prefixes {
		if i := strings.Index(msg, p); i == 0 || (i > 0 && strings.Contains(msg, ": "+p)) {
			return true
		}
	}
	return false
}

// trimPrefixes removes every leading package prefix of s.
func trimPrefixes(s string) string {
	for {
		trimmed := false
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				s, trimmed = s[len(p):], true
			}
		}
		if !trimmed {
			return s
		}
	}
}

// Cap is s as a log line, an audit record or an answer shows text a client
// sent (a user name, a path, a document id): valid UTF-8 of at most n
// bytes, each run of bytes that is not UTF-8 shown as one "?", and cut on
// a rune boundary, ending in "…", when it is longer than n bytes, so that
// text of any length costs bounded space. n is at least len("…").
func Cap(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	// Read no more of s than can be shown: n bytes and one more rune say
	// whether it is to be cut.
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() <= n; {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		b.WriteByte('?')
		for i < len(s) { // the run of bytes that are not UTF-8
			if r, size := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || size > 1 {
				break
			}
			i++
		}
	}
	out := b.String()
	if len(out) <= n {
		return out
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + "…"
}
