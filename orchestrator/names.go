package orchestrator

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
)

var nameAdjectives = [...]string{
	"amber", "bold", "brave", "bright", "calm", "clever", "cosmic", "crisp",
	"dapper", "eager", "fancy", "fierce", "gentle", "glad", "golden", "happy",
	"humble", "jolly", "keen", "kind", "lively", "lucky", "mellow", "merry",
	"nimble", "noble", "plucky", "proud", "quick", "quiet", "rapid", "rosy",
	"shiny", "silent", "sleek", "smart", "snappy", "solid", "spry", "steady",
	"sunny", "swift", "tidy", "vivid", "warm", "wise", "witty", "zesty",
}

// NewNodeName returns a random name of the form adjective-number, such as
// "swift-417" (number in 1..999).
func NewNodeName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	n := binary.LittleEndian.Uint64(b[:])
	adj := nameAdjectives[n%uint64(len(nameAdjectives))]
	num := (n/uint64(len(nameAdjectives)))%999 + 1
	return adj + "-" + strconv.FormatUint(num, 10)
}
