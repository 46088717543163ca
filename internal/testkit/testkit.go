// Package testkit is what the tests share: a fake clock, polling with a
// deadline, temp data directories, programs and images built once, and what
// a test does when Docker, FUSE or Chromium is missing (fails under CI=true).
//
// It imports only the standard library, so that the tests of every layer
// (protocol, containers, relay, adapters) may use it.
package testkit
