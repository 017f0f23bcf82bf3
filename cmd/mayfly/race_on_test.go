//go:build race

package main

// raceBuild says the tests run under the race detector, whose shadow
// memory makes a process's resident memory many times its own.
const raceBuild = true
