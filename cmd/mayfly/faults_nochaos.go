//go:build !chaos

package main

import (
	"net/http"

	"github.com/spf13/pflag"
)

// faultConfig is empty in a normal build: fault injection
// (--chaos-cut-file) exists only in a binary built with -tags chaos
// (faults_chaos.go).
type faultConfig struct{}

func (*faultConfig) register(*pflag.FlagSet) {}

// cut is nil: replica drops no frame.
func (*faultConfig) cut() func(peer uint64) bool { return nil }

// handler is api: a normal build serves no chaos read of its groups'
// progress.
func (*faultConfig) handler(api http.Handler, _ *router) http.Handler { return api }
