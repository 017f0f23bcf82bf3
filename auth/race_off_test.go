//go:build !race

package auth

// raceBuild says the tests run under the race detector (see race_on_test.go).
const raceBuild = false
