//go:build !linux

package memcache

import (
	"context"
	"errors"
	"net"
)

// DefaultIO is Options.IO's default: a goroutine per connection, where
// there is no epoll.
const DefaultIO = IOGoroutines

// eventLoopSupported says whether IOEventLoop can be chosen.
const eventLoopSupported = false

// eventLoops is not built here: every connection has its goroutine.
type eventLoops struct{}

func (s *Server) startEventLoops() (*eventLoops, error) { return nil, errNoEventLoop }

func (e *eventLoops) add(ctx context.Context, nc net.Conn, done func()) bool { return false }

func (e *eventLoops) sweep() {}

func (e *eventLoops) stop() {}

// errNoEventLoop is why startEventLoops fails here.
var errNoEventLoop = errors.New("memcache: event loops need Linux's epoll")
