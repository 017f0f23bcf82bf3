package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A serve flag whose value can never work (a log level slog does not know,
// a memcached item size outside 314 bytes to 20 MiB) is a mistake in the
// command line: exit 2 with the flag named, before the data directory is
// made, as every other serve flag is checked; a review found both exited 1,
// the item size only after the data directory and its default bucket were
// created.
func TestServeFlagValueMistakesExitTwo(t *testing.T) {
	for _, c := range []struct {
		flag, value string
	}{
		{"--log-level", "loud"},
		{"--memcached-item-size-max", "100"},
		{"--memcached-item-size-max", "999999999"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var stdout, stderr strings.Builder
		code := run([]string{"serve", "--data", dir, c.flag, c.value, "--http", "127.0.0.1:0",
			"--memcached", "127.0.0.1:0", "--kv", "", "--kv-tls", "", "--views", "", "--search", "",
			"--admin-password", adminPass}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("serve %s %s: exit %d, stderr %q; want exit 2 naming %s", c.flag, c.value, code, stderr.String(), c.flag)
		}
	}
}

// --cors-origin takes a browser origin, scheme://host[:port], the form a
// browser's Origin header has; a value without a scheme can never match one,
// so serve refuses it (exit 2, the flag named) rather than start with CORS
// silently off; a review found `--cors-origin app.example.com` started and
// answered no Access-Control-Allow-Origin to https://app.example.com.
func TestServeRefusesCORSOriginWithoutScheme(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", dir, "--cors-origin", "app.example.com", "--http", "127.0.0.1:0",
			"--memcached", "", "--kv", "", "--kv-tls", "", "--views", "", "--search", "",
			"--admin-password", adminPass, "--log-level", "error"}, &stdout, &stderr)
	}()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "--cors-origin") {
				t.Errorf("serve --cors-origin app.example.com: %v, stderr %q; want a usage error naming --cors-origin", err, stderr.String())
			}
			return
		default:
		}
		if strings.Contains(stdout.String(), "serving HTTP on") {
			cancel()
			<-done
			t.Fatalf("serve --cors-origin app.example.com started (CORS silently off); want a usage error naming --cors-origin")
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve neither started nor ended; stderr %q", stderr.String())
		}
	}
}
