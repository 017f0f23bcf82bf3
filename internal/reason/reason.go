// Package reason turns Go errors into the reasons clients are shown: the
// HTTP API's "reason" fields and the memcached protocol's SERVER_ERROR
// lines.
//
// Mayfly's packages prefix their error texts with the package name, as Go
// storage libraries do ("engine: document not found"), which helps in logs
// and in Go callers' messages; a client of the HTTP API or of memcached is
// no Go caller, and is shown the same sentence without those prefixes
// ("document not found: k"). This package is the one place that does it, so
// that an error added later needs nothing to read well.
package reason

import "strings"

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
