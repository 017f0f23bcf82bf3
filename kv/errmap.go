package kv

import (
	"encoding/json"
	"strconv"
)

// errMapEntry is one status in the error map, in Couchbase's shape.
type errMapEntry struct {
	Name  string       `json:"name"`
	Desc  string       `json:"desc"`
	Attrs []string     `json:"attrs"`
	Retry *errMapRetry `json:"retry,omitempty"`
}

// errMapRetry is an entry's retry advice, in milliseconds.
type errMapRetry struct {
	Strategy    string `json:"strategy"`
	Interval    int    `json:"interval"`
	After       int    `json:"after"`
	Ceil        int    `json:"ceil"`
	MaxDuration int    `json:"max-duration"`
}

// backoff is the retry advice of a temporary failure.
var backoff = &errMapRetry{Strategy: "exponential", Interval: 7, After: 10, Ceil: 1000, MaxDuration: 5000}

// errMapEntries are the statuses Mayfly answers (and a few an SDK may meet
// anyway), with Couchbase's names and attributes: what a client reads to
// decide whether to retry, refetch the configuration or give up.
var errMapEntries = map[uint16]errMapEntry{
	0x00: {"SUCCESS", "Success", []string{"success"}, nil},
	0x01: {"KEY_ENOENT", "Not Found", []string{"item-only"}, nil},
	0x02: {"KEY_EEXISTS", "key already exists, or CAS mismatch", []string{"item-only"}, nil},
	0x03: {"E2BIG", "Value is too big", []string{"invalid-input"}, nil},
	0x04: {"EINVAL", "Invalid packet", []string{"invalid-input"}, nil},
	0x05: {"NOT_STORED", "Not Stored", []string{"item-only"}, nil},
	0x06: {"DELTA_BADVAL", "Existing document not a number", []string{"item-only", "invalid-input"}, nil},
	0x07: {"NOT_MY_VBUCKET", "Server does not own this vBucket", []string{"fetch-config", "invalid-input"}, nil},
	0x09: {"LOCKED", "The document is locked", []string{"item-locked", "item-only"}, nil},
	0x0e: {"NOT_LOCKED", "The document is not locked", []string{"item-only"}, nil},
	0x08: {"NO_BUCKET", "Not connected to a bucket", []string{"conn-state-invalidated"}, nil},
	0x20: {"AUTH_ERROR", "Authentication failed", []string{"auth", "conn-state-invalidated"}, nil},
	0x21: {"AUTH_CONTINUE", "Continue authentication", []string{"auth", "special-handling"}, nil},
	0x24: {"EACCESS", "No access", []string{"auth"}, nil},
	0x80: {"UNKNOWN_FRAME_INFO", "Unknown frame info identifier encountered", []string{"support"}, nil},
	0x81: {"UNKNOWN_COMMAND", "Unknown command", []string{"support"}, nil},
	0x82: {"ENOMEM", "Out of memory", []string{"temp", "retry-later"}, backoff},
	0x83: {"NOT_SUPPORTED", "Not supported", []string{"support"}, nil},
	0x84: {"EINTERNAL", "Internal error", []string{"internal"}, nil},
	0x85: {"EBUSY", "Server busy", []string{"temp", "retry-now"}, backoff},
	0x86: {"ETMPFAIL", "Temporary failure", []string{"temp", "retry-later"}, backoff},
	0x88: {"UNKNOWN_COLLECTION", "Unknown collection", []string{"special-handling"}, nil},
	0x8c: {"UNKNOWN_SCOPE", "Unknown scope", []string{"special-handling"}, nil},
	0xa0: {"DURABILITY_INVALID_LEVEL", "Invalid durability level specified", []string{"invalid-input"}, nil},
	0xa3: {"SYNC_WRITE_AMBIGUOUS", "The SyncWrite request has not completed in the specified time and has ambiguous result", []string{"special-handling"}, nil},
	0xc0: {"SUBDOC_PATH_ENOENT", "Subdoc: path not found", []string{"subdoc", "item-only"}, nil},
	0xc1: {"SUBDOC_PATH_MISMATCH", "Subdoc: path mismatch", []string{"subdoc", "item-only"}, nil},
	0xc2: {"SUBDOC_PATH_EINVAL", "Subdoc: invalid path", []string{"subdoc", "invalid-input"}, nil},
	0xc3: {"SUBDOC_PATH_E2BIG", "Subdoc: path too large", []string{"subdoc", "invalid-input"}, nil},
	0xc4: {"SUBDOC_DOC_E2DEEP", "Subdoc: document too deep", []string{"subdoc", "item-only"}, nil},
	0xc5: {"SUBDOC_VALUE_CANTINSERT", "Subdoc: cannot insert the value", []string{"subdoc", "invalid-input"}, nil},
	0xc6: {"SUBDOC_DOC_NOT_JSON", "Subdoc: document is not JSON", []string{"subdoc", "item-only"}, nil},
	0xc7: {"SUBDOC_NUM_ERANGE", "Subdoc: the number is out of range", []string{"subdoc", "item-only"}, nil},
	0xc8: {"SUBDOC_DELTA_EINVAL", "Subdoc: invalid delta", []string{"subdoc", "invalid-input"}, nil},
	0xc9: {"SUBDOC_PATH_EEXISTS", "Subdoc: the path exists", []string{"subdoc", "item-only"}, nil},
	0xca: {"SUBDOC_VALUE_ETOODEEP", "Subdoc: the value is too deep", []string{"subdoc", "invalid-input"}, nil},
	0xcb: {"SUBDOC_INVALID_COMBO", "Subdoc: invalid combination of commands", []string{"subdoc", "invalid-input"}, nil},
	0xcc: {"SUBDOC_MULTI_PATH_FAILURE", "Subdoc: one or more paths failed", []string{"subdoc"}, nil},
	0xcd: {"SUBDOC_SUCCESS_DELETED", "Subdoc: success on a deleted document", []string{"subdoc", "success"}, nil},
	0xcf: {"SUBDOC_XATTR_INVALID_KEY_COMBO", "Subdoc: only one xattr key per request", []string{"subdoc", "invalid-input"}, nil},
	0xd1: {"SUBDOC_XATTR_UNKNOWN_VATTR", "Subdoc: unknown virtual attribute", []string{"subdoc", "invalid-input"}, nil},
}

// errorMap is the error map JSON of the given version (1 or 2; they differ
// only in what a version 2 client may find in an entry).
func errorMap(version int) []byte {
	errs := make(map[string]errMapEntry, len(errMapEntries))
	for code, e := range errMapEntries {
		errs[strconv.FormatUint(uint64(code), 16)] = e
	}
	b, _ := json.Marshal(map[string]any{"version": version, "revision": 1, "errors": errs})
	return b
}
