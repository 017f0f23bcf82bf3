//go:build !unix

package memcache

// processCPU returns zero CPU times where getrusage is missing.
func processCPU() (user, system string) { return "0.000000", "0.000000" }
