package httpapi

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/mayflydb/mayfly/changes"
	"github.com/mayflydb/mayfly/engine"
)

// changesStall is how long a change feed waits for a client that has
// stopped reading before it gives up on it: each flush moves the write
// deadline this far ahead (plus the feed's own timeout or heartbeat, the
// longest it may go without writing), so a long feed outlives the server's
// --write-timeout while a stalled one still ends.
const changesStall = 2 * time.Minute

// errFeedOnCluster refuses the change feed, and a listing's update_seq (a
// position in it), on a cluster's bucket: a node's copy holds only the
// partitions it has a copy of, its positions are CAS values that several
// leaders stamp from their own clocks (a follower applies them in any
// order), and its history is the node's own, so a client following the
// feed there would miss writes, silently. Refused until positions are per
// partition and the feed is served by coverage (README, "Change feed").
func errFeedOnCluster() error {
	return &httpError{http.StatusNotImplemented, "not_implemented", "the change feed is not available on a cluster's bucket yet: a node holds only its own copies, and a position taken on one node is not one on another, so a client following it would miss writes; list the bucket with _all_docs or a view, or use a single node for _changes"}
}

// changesFeed handles GET and POST /{bucket}/_changes: the bucket's change
// feed in CouchDB's shape (package changes). Errors found before the feed
// starts are answered as JSON; once rows flow, an error ends the answer.
func (s *server) changesFeed(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	if b.Replicated() {
		return errFeedOnCluster()
	}
	var body []byte
	if r.Method == http.MethodPost {
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, engine.MaxValueLen)); err != nil {
			return err
		}
	}
	req, err := changes.ParseRequest(r.URL.Query(), body)
	if err != nil {
		return err
	}
	req.ResumeFrom(r.Header.Get("Last-Event-ID"))
	c, err := collectionOf(b, r.URL.Query())
	if err != nil {
		return err
	}
	// The feed holds what is on disk. Writes acknowledged from memory
	// (durability none or majority) and deletions made by reads of expired
	// documents are committed first, so a client sees in the feed every
	// change it saw answered before it asked (and since=now starts after
	// them): at once when nothing waits for disk.
	if err := b.Sync(r.Context()); err != nil {
		return err
	}
	feed, err := changes.Open(b, c.ID(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", feed.ContentType())
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	streamEstablished(r) // a feed that stays open holds no request slot
	// A feed may wait up to its timeout or heartbeat between writes.
	stall := changesStall + max(req.Timeout, req.Heartbeat, 0)
	if err := feed.Run(r.Context(), &responseSink{w: w, rc: http.NewResponseController(w), stall: stall}); err != nil && r.Context().Err() == nil {
		s.log.Info("change feed ended early", "bucket", b.Name(), "err", err)
	}
	return nil
}

// responseSink is a changes.Sink over an HTTP response.
type responseSink struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (rs *responseSink) Write(p []byte) (int, error) { return rs.w.Write(p) }

// Flush moves the write deadline on and sends what is buffered.
func (rs *responseSink) Flush() error {
	if err := rs.rc.SetWriteDeadline(time.Now().Add(rs.stall)); err != nil && !errors.Is(err, http.ErrNotSupported) { // wall clock: a network deadline
		return err
	}
	return rs.rc.Flush()
}
