//go:build !chaos

package main

import "github.com/spf13/pflag"

// faultConfig is empty in a normal build: fault injection
// (--chaos-cut-file) exists only in a binary built with -tags chaos
// (faults_chaos.go).
type faultConfig struct{}

func (*faultConfig) register(*pflag.FlagSet) {}

// cut is nil: replica drops no frame.
func (*faultConfig) cut() func(peer uint64) bool { return nil }
