//go:build !linux

package store

import "time"

// threadCPU is only measured on Linux; elsewhere it reports 0.
func threadCPU() func() time.Duration { return func() time.Duration { return 0 } }

// processCPU is only measured on Linux; elsewhere it reports 0.
func processCPU() func() time.Duration { return func() time.Duration { return 0 } }
