// Package auth is Mayfly's users, roles and permissions, in Couchbase's
// shapes: local users with roles such as data_reader[travel] or admin, their
// passwords hashed with argon2id in <data>/users.json, and the permission each
// request needs. It knows nothing of HTTP routing; httpapi maps its routes to
// permissions and asks a Store who is calling.
package auth

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalidRole reports a role name or bucket that cannot be parsed.
var ErrInvalidRole = errors.New("invalid role")

// Role names as Couchbase spells them. The bucket roles take a bucket in
// brackets; [*] means every bucket.
const (
	RoleAdmin       = "admin"
	RoleROAdmin     = "ro_admin"
	RoleBucketAdmin = "bucket_admin"
	RoleDataReader  = "data_reader"
	RoleDataWriter  = "data_writer"
	RoleViewsReader = "views_reader"
	RoleViewsAdmin  = "views_admin"
	RoleFTSSearcher = "fts_searcher"
	RoleFTSAdmin    = "fts_admin"
	// RoleDataDCPReader reads a bucket's change feed (_changes), and its
	// documents, as Couchbase's data_dcp_reader reads DCP streams.
	RoleDataDCPReader = "data_dcp_reader"
)

// bucketRoles are the roles that take a bucket.
var bucketRoles = map[string]bool{
	RoleBucketAdmin: true, RoleDataReader: true, RoleDataWriter: true,
	RoleViewsReader: true, RoleViewsAdmin: true,
	RoleFTSSearcher: true, RoleFTSAdmin: true, RoleDataDCPReader: true,
}

// Role is one role; Bucket is "" for admin and ro_admin, "*" for every bucket.
type Role struct {
	Name   string
	Bucket string
}

// String is the role as Couchbase writes it: data_reader[travel].
func (r Role) String() string {
	if r.Bucket == "" {
		return r.Name
	}
	return r.Name + "[" + r.Bucket + "]"
}

// ParseRole parses "admin", "ro_admin" or "data_reader[travel]".
func ParseRole(s string) (Role, error) {
	s = strings.TrimSpace(s)
	name, rest, hasBucket := strings.Cut(s, "[")
	if !hasBucket {
		if name == RoleAdmin || name == RoleROAdmin {
			return Role{Name: name}, nil
		}
		if bucketRoles[name] {
			return Role{}, fmt.Errorf("%w: %s needs a bucket, as %s[bucket] or %s[*]", ErrInvalidRole, name, name, name)
		}
		return Role{}, fmt.Errorf("%w: unknown role %q", ErrInvalidRole, s)
	}
	bucket, ok := strings.CutSuffix(rest, "]")
	if !bucketRoles[name] {
		return Role{}, fmt.Errorf("%w: unknown role %q", ErrInvalidRole, s)
	}
	if !ok || bucket == "" || strings.ContainsAny(bucket, "[]") {
		return Role{}, fmt.Errorf("%w: %q: the bucket goes in brackets, as %s[bucket]", ErrInvalidRole, s, name)
	}
	return Role{Name: name, Bucket: bucket}, nil
}

// ParseRoles parses a comma-separated role list, as the REST API takes it.
// Duplicates are dropped; the result is sorted.
func ParseRoles(s string) ([]Role, error) {
	seen := map[Role]bool{}
	var roles []Role
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		r, err := ParseRole(part)
		if err != nil {
			return nil, err
		}
		if !seen[r] {
			seen[r] = true
			roles = append(roles, r)
		}
	}
	sort.Slice(roles, func(i, j int) bool { return roles[i].String() < roles[j].String() })
	return roles, nil
}

// Action is what a request does; with a bucket it makes a Permission.
type Action int

// The actions. Each names the Couchbase permission it stands for.
const (
	// PoolsRead lists buckets (filtered to those the caller has a role on).
	PoolsRead Action = iota
	// BucketsCreate creates a bucket.
	BucketsCreate
	// BucketDelete deletes a bucket.
	BucketDelete
	// SettingsRead reads a bucket's settings, scopes and pager settings.
	SettingsRead
	// SettingsWrite changes a bucket's settings, scopes, collections, pager.
	SettingsWrite
	// StatsRead reads a bucket's statistics.
	StatsRead
	// DataRead reads documents.
	DataRead
	// DataWrite writes, touches and deletes documents.
	DataWrite
	// ViewsRead queries views and reads design documents.
	ViewsRead
	// ViewsWrite writes and deletes design documents.
	ViewsWrite
	// MetricsRead scrapes /metrics (every bucket's statistics).
	MetricsRead
	// SecurityRead lists users.
	SecurityRead
	// SecurityWrite creates, changes and deletes users.
	SecurityWrite
	// SearchRead queries full-text indexes and reads their definitions.
	SearchRead
	// SearchWrite creates, replaces and deletes full-text indexes.
	SearchWrite
	// ChangesRead reads a bucket's change feed (_changes), as Couchbase's
	// DCP read permission.
	ChangesRead
)

// Permission is an action, on a bucket where the action takes one.
type Permission struct {
	Action Action
	Bucket string
}

// String is the permission in Couchbase's notation, as 403 answers list it.
func (p Permission) String() string {
	b := "cluster.bucket[" + p.Bucket + "]"
	switch p.Action {
	case PoolsRead:
		return "cluster.pools!read"
	case BucketsCreate:
		return "cluster.buckets!create"
	case BucketDelete:
		return b + "!delete"
	case SettingsRead:
		return b + ".settings!read"
	case SettingsWrite:
		return b + ".settings!write"
	case StatsRead:
		return b + ".stats!read"
	case DataRead:
		return b + ".data.docs!read"
	case DataWrite:
		return b + ".data.docs!write"
	case ViewsRead:
		return b + ".views!read"
	case ViewsWrite:
		return b + ".views!write"
	case MetricsRead:
		return "cluster.stats!read"
	case SecurityRead:
		return "cluster.admin.security!read"
	case SecurityWrite:
		return "cluster.admin.security!write"
	case SearchRead:
		return b + ".fts!read"
	case SearchWrite:
		return b + ".fts!write"
	case ChangesRead:
		return b + ".data.dcp!read"
	}
	return "unknown"
}

// ErrInvalidPermission reports a permission that ParsePermission cannot
// read.
var ErrInvalidPermission = errors.New("invalid permission")

// ParsePermission reads a permission in Couchbase's notation, as String
// writes it: "cluster.buckets!create", "cluster.bucket[travel].data.docs!write".
func ParsePermission(s string) (Permission, error) {
	s = strings.TrimSpace(s)
	bucket := ""
	if rest, ok := strings.CutPrefix(s, "cluster.bucket["); ok {
		b, _, ok := strings.Cut(rest, "]")
		if !ok || b == "" || strings.Contains(b, "[") {
			return Permission{}, fmt.Errorf("%w: %q", ErrInvalidPermission, s)
		}
		bucket = b
	}
	// Every action, until String knows no more: one notation, String's.
	for a := Action(0); ; a++ {
		p := Permission{Action: a, Bucket: bucket}
		switch p.String() {
		case "unknown":
			return Permission{}, fmt.Errorf("%w: %q", ErrInvalidPermission, s)
		case s:
			return p, nil
		}
	}
}

// grants lists what each role may do (admin may do everything). A bucket
// role grants its actions on its bucket only; every bucket role also grants
// PoolsRead, SettingsRead and StatsRead on its bucket ("any role on the
// bucket" may see the bucket and its statistics).
var grants = map[string][]Action{
	RoleROAdmin:     {PoolsRead, SettingsRead, StatsRead, MetricsRead},
	RoleBucketAdmin: {SettingsWrite, ChangesRead},
	RoleDataReader:  {DataRead},
	RoleDataWriter:  {DataWrite},
	RoleViewsReader: {ViewsRead},
	RoleViewsAdmin:  {ViewsRead, ViewsWrite},
	RoleFTSSearcher: {SearchRead},
	RoleFTSAdmin:    {SearchRead, SearchWrite},
	// Couchbase's data_dcp_reader reads documents too: a DCP stream
	// carries them.
	RoleDataDCPReader: {DataRead, ChangesRead},
}

// Allows reports whether r grants p.
func (r Role) Allows(p Permission) bool {
	if r.Name == RoleAdmin {
		return true
	}
	if r.Name == RoleROAdmin {
		return hasAction(grants[RoleROAdmin], p.Action)
	}
	if !bucketRoles[r.Name] {
		return false
	}
	if p.Action == PoolsRead {
		return true
	}
	if r.Bucket != "*" && r.Bucket != p.Bucket {
		return false
	}
	switch p.Action {
	case SettingsRead, StatsRead:
		return true
	}
	return hasAction(grants[r.Name], p.Action)
}

// OnBucket reports whether r gives any access to bucket (to filter lists).
func (r Role) OnBucket(bucket string) bool {
	return r.Name == RoleAdmin || r.Name == RoleROAdmin || (bucketRoles[r.Name] && (r.Bucket == "*" || r.Bucket == bucket))
}

func hasAction(as []Action, a Action) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// Principal is an authenticated caller.
type Principal struct {
	Name string
	// Incarnation is the user's User.Incarnation when it authenticated:
	// Store.Refresh tells a user deleted and created again under Name
	// from the one that logged in.
	Incarnation string
	Roles       []Role
}

// Allows reports whether any of the caller's roles grants p.
func (p *Principal) Allows(perm Permission) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Roles {
		if r.Allows(perm) {
			return true
		}
	}
	return false
}

// SeesBucket reports whether the caller has any role on bucket.
func (p *Principal) SeesBucket(bucket string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Roles {
		if r.OnBucket(bucket) {
			return true
		}
	}
	return false
}

// RoleDescription is one role Mayfly knows, as Couchbase's
// GET /settings/rbac/roles lists it.
type RoleDescription struct {
	// Role is the name as written in a role list (data_reader).
	Role string
	// DisplayName is the name a console shows (Data Reader).
	DisplayName string
	// Description says what the role allows.
	Description string
	// TakesBucket is true for the roles given on a bucket (data_reader[b]).
	TakesBucket bool
}

// Roles lists every role a user may be given, in a fixed order.
func Roles() []RoleDescription {
	return []RoleDescription{
		{RoleAdmin, "Full Admin", "Can manage all cluster features, including security, and read and write all data.", false},
		{RoleROAdmin, "Read-Only Admin", "Can read the buckets' settings and statistics, but cannot change them, read users or read data.", false},
		{RoleBucketAdmin, "Bucket Admin", "Can change the bucket's settings, scopes, collections and pager, and read its change feed.", true},
		{RoleDataReader, "Data Reader", "Can read the bucket's documents.", true},
		{RoleDataWriter, "Data Writer", "Can write and delete the bucket's documents.", true},
		{RoleDataDCPReader, "Data DCP Reader", "Can read the bucket's change feed and its documents.", true},
		{RoleViewsReader, "Views Reader", "Can query the bucket's views.", true},
		{RoleViewsAdmin, "Views Admin", "Can create, change and delete the bucket's design documents, and query its views.", true},
		{RoleFTSSearcher, "Search Reader", "Can query the bucket's search indexes.", true},
		{RoleFTSAdmin, "Search Admin", "Can create, change and delete the bucket's search indexes, and query them.", true},
	}
}
