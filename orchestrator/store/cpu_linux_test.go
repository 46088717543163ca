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
