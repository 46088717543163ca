package store

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU locks the calling goroutine to its OS thread and returns a
// function that unlocks it and reports the CPU time (user+system) that thread
// used since. cgo calls run on the calling thread, so this counts SQLite's
// work too, and unlike wall time it does not depend on how busy the machine is.
func threadCPU() func() time.Duration {
	runtime.LockOSThread()
	start := rusageThread()
	return func() time.Duration {
		d := rusageThread() - start
		runtime.UnlockOSThread()
		return d
	}
}

func rusageThread() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns a function that reports the CPU time (user+system) the
// whole process used since: for benchmarks whose work runs on many
// goroutines (and threads).
func processCPU() func() time.Duration {
	start := rusage(syscall.RUSAGE_SELF)
	return func() time.Duration { return rusage(syscall.RUSAGE_SELF) - start }
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
