// Package gocompat proves weir with the Go Kafka clients most Go services use: franz-go
// (kgo and kadm) and IBM/sarama with its default settings. The Rust test
// tests/go_clients.rs starts a real weir and runs `go test` here with WEIR_BOOTSTRAP set.
package gocompat

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// bootstrap is the weir under test; a run without one fails rather than passing empty.
func bootstrap(t *testing.T) []string {
	t.Helper()
	b := os.Getenv("WEIR_BOOTSTRAP")
	if b == "" {
		t.Fatal("WEIR_BOOTSTRAP=HOST:PORT is not set: tests/go_clients.rs starts weir and sets it")
	}
	return strings.Split(b, ",")
}

// unique is a name no other test uses.
func unique(prefix string) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}
