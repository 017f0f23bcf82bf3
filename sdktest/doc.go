// Package sdktest runs the official Couchbase Go SDK (gocb), unmodified,
// against a Mayfly server started in the test: it is its own module, so the
// SDK's dependencies (grpc, opentelemetry, ...) stay out of Mayfly's.
// `make test` runs it (cd sdktest && go test ./...).
package sdktest
