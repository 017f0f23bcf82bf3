//go:build !race

package main

// raceBuild says the tests run under the race detector (race_on_test.go).
const raceBuild = false
