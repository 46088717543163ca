// Package containers starts, attaches to, stops and finds agent containers
// behind one small Runtime interface, with a Docker implementation and a
// local-process implementation for development. It knows nothing of sessions
// beyond the labels it puts on what it starts.
package containers

import (
	"context"
	"io"
	"time"
)

// Labels every container created by a Runtime carries, and the state volume
// (Spec.StateVolume) it makes for one.
const (
	LabelManaged = "filepath.managed" // always "true"
	LabelSession = "filepath.session" // Spec.SessionID
	LabelNode    = "filepath.node"    // Spec.NodeID
	// LabelInstance scopes containers and volumes to one orchestrator
	// (DockerConfig.Instance, or the Spec's own label).
	LabelInstance = "filepath.instance"
)

// EnvStateDir names the directory of an agent's state volume
// (Spec.StateVolume), in an image's environment or a Spec's.
const EnvStateDir = "FILEPATH_STATE_DIR"

// Runtime runs agent processes. Both implementations behave the same for
// every method; the package tests run one table against both.
type Runtime interface {
	// Create makes a container (or process slot) from spec without starting it.
	Create(ctx context.Context, spec Spec) (id string, err error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// AttachStdin returns a writer to the container's stdin. Closing it
	// detaches without closing the container's stdin, so a restarted
	// orchestrator can attach again.
	AttachStdin(ctx context.Context, id string) (io.WriteCloser, error)
	// Logs reads the container's output as lines; see LogLine for the cursor
	// rules that make resumption after a restart exact.
	Logs(ctx context.Context, id string, opts LogOptions) (*LogReader, error)
	// Wait blocks until the container is not running and returns its exit
	// code (0 for a container that was never started).
	Wait(ctx context.Context, id string) (exitCode int, err error)
	// Stop sends SIGTERM, waits up to grace, then sends SIGKILL and waits
	// for the exit. The caller writes the polite signal{stop} line first;
	// Stop is the escalation. A paused container is unpaused first. Stopping
	// a container that does not run is not an error.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Pause freezes every process of the container; Unpause thaws them.
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
	// Remove deletes the container, killing it if it runs. Removing a
	// container that does not exist is not an error.
	Remove(ctx context.Context, id string) error
	// RemoveVolume deletes a state volume (Spec.StateVolume) and what it
	// holds; removing one that does not exist is not an error. No container
	// using it may exist: while one does (running or not), the volume is
	// kept and the error's code is CodeConflict.
	RemoveVolume(ctx context.Context, name string) error
	// ListVolumes returns the state volumes this Runtime made (they carry
	// the labels of the Spec that made them) whose labels include every
	// key=value of labels (nil: all of them). A volume made by anything
	// else, or before volumes were labelled, is never listed.
	ListVolumes(ctx context.Context, labels map[string]string) ([]VolumeInfo, error)
	// List returns the managed containers whose labels include every
	// key=value of labels (nil: all managed containers), running or not.
	List(ctx context.Context, labels map[string]string) ([]Info, error)
	// Inspect returns one container's state; ENotFound if it does not exist.
	Inspect(ctx context.Context, id string) (Info, error)
}

// Spec describes one agent container.
type Spec struct {
	SessionID string // label filepath.session; required
	NodeID    string // label filepath.node; required
	Name      string // optional container name
	Image     string // docker: required; process: informational
	// Env holds the contract variables (FILEPATH_TASK, FILEPATH_API_KEY,
	// FILEPATH_API_URL, FILEPATH_AGENT_ID, FILEPATH_SESSION_ID,
	// FILEPATH_MODEL, FILEPATH_AGENT_TYPE, FILEPATH_PARENT_ID), set by the
	// caller.
	Env map[string]string
	// WorkspaceDir is the host directory bind-mounted at /workspace (docker)
	// or used as the working directory (process). Optional.
	WorkspaceDir string
	// WorkspacePropagation is the bind propagation of /workspace ("" is
	// Docker's rprivate). "rslave" lets a FUSE mount made later under
	// WorkspaceDir show up in a running container; Docker then requires the
	// host mount holding WorkspaceDir to be shared or slave.
	WorkspacePropagation string
	// StateVolume, when set, names the node's state volume: it outlives
	// the container (a later container of the node mounts it again) until
	// RemoveVolume. It is mounted at the directory FILEPATH_STATE_DIR names
	// (Env, else the image's environment), where an agent keeps what it
	// needs to resume (a CLI's sessions); an image without it gets none.
	// The process runtime makes it a directory and sets FILEPATH_STATE_DIR.
	StateVolume string
	Labels      map[string]string // extra labels; the filepath.* ones are always set
	Limits      Limits            // zero fields take DefaultLimits
	// Network is the docker network mode; "" takes the runtime's default
	// ("none": the container reaches only what is served in its namespace;
	// "bridge" gives it the host's routes).
	Network string
	// JoinNetwork, when set, runs the container in the network namespace
	// of container JoinNetwork of this runtime (its sandbox, which ListenIn
	// serves), instead of one of its own; Network is then unused. The
	// process runtime has no namespaces and ignores it.
	JoinNetwork    string
	ReadOnlyRootfs bool     // mount / read-only, with a tmpfs at /tmp
	User           string   // optional user[:group] to run as
	Cmd            []string // docker: overrides the image's CMD; process: required argv
	// Entrypoint, when set, overrides the image's ENTRYPOINT (docker; the
	// process runtime runs Entrypoint followed by Cmd): a run of another
	// program in an agent's image (a health check) must not start through
	// its agent.
	Entrypoint []string
}

// Limits bound a container's resources.
type Limits struct {
	MemoryBytes int64 // hard memory limit
	NanoCPUs    int64 // CPU quota in units of 1e-9 CPUs
	PidsLimit   int64 // max processes/threads
}

// DefaultLimits are used for each zero field of Spec.Limits.
func DefaultLimits() Limits {
	return Limits{MemoryBytes: 2 << 30, NanoCPUs: 2e9, PidsLimit: 512}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.NanoCPUs <= 0 {
		l.NanoCPUs = d.NanoCPUs
	}
	if l.PidsLimit <= 0 {
		l.PidsLimit = d.PidsLimit
	}
	return l
}

// State is a container's coarse state.
type State string

// States. Docker's "restarting", "removing" and "dead" map to StateExited.
const (
	StateCreated State = "created"
	StateRunning State = "running"
	StatePaused  State = "paused"
	StateExited  State = "exited"
)

// Info is what List and Inspect report.
type Info struct {
	ID         string
	Name       string
	Image      string
	SessionID  string
	NodeID     string
	Labels     map[string]string
	State      State
	ExitCode   int // meaningful when State is StateExited
	OOMKilled  bool
	StartedAt  time.Time // zero if never started
	FinishedAt time.Time // zero if not exited
}

// VolumeInfo is what ListVolumes reports of a state volume: its name and the
// labels of the Spec that made it.
type VolumeInfo struct {
	Name      string
	SessionID string // label filepath.session
	NodeID    string // label filepath.node
	Labels    map[string]string
}

// Stream names an output stream.
type Stream int

// Streams, numbered as in Docker's multiplexed framing.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "stream?"
}

// LogOptions select what Logs returns.
type LogOptions struct {
	// Since returns only lines whose Time is at or after Since (zero: from
	// the start). See LogLine. Docker's API takes since as
	// "seconds.nanoseconds"; it is sent with all nine digits and the engine
	// keeps every message not before it, so the filter is inclusive at full
	// nanosecond precision and the line stamped exactly Since comes back
	// (tested), which is what cursor de-duplication needs.
	Since time.Time
	// Follow keeps the reader open for new lines until the container stops
	// (or ctx ends); without it the reader ends at the current end of log.
	Follow bool
	// Stdout and Stderr pick the streams; both false means both.
	Stdout, Stderr bool
	// MaxLine bounds one line in bytes (default DefaultMaxLine). The rest of
	// a longer line is read and dropped, never buffered.
	MaxLine int
}

// DefaultMaxLine is the default bound of one log line (1 MiB).
const DefaultMaxLine = 1 << 20

// LogLine is one line of container output.
//
// Cursor rules. Docker stamps every log message with a nanosecond time, and
// gives all 16 KiB fragments of one long line the time of the first; Logs
// reassembles the fragments, so Time identifies a whole line. Ordinal numbers
// the lines of one stream that share a Time (0, 1, ...), counted from the
// start of that Time, so (Stream, Time, Ordinal) names a line and is the same
// in every Logs call whose Since is at or before Time.
//
// A consumer that persists the cursor (Time, Ordinal) of the last line it
// handled of a stream resumes with Logs(Since: cursor.Time) and skips lines
// of that stream with Time == cursor.Time and Ordinal <= cursor.Ordinal:
// every later line arrives exactly once. Do not persist the cursor of an
// Unterminated line while the container still runs: its rest may follow.
// Recovery reaches back as far as the container's log retention (for Docker:
// DockerConfig.LogMaxSize x LogMaxFiles of json-file data per container).
type LogLine struct {
	Stream  Stream
	Time    time.Time // the runtime's timestamp of the line (of its first fragment)
	Ordinal int       // index among this stream's lines with the same Time
	Line    []byte    // the line without its newline, at most MaxLine bytes
	// Size is the full length of the line in bytes (without the newline);
	// larger than len(Line) when Truncated.
	Size      int
	Truncated bool // the line was longer than MaxLine; the rest was dropped
	// Unterminated is set for a final line the log ended without a newline:
	// the container exited mid-line, or (without Follow) is still writing it.
	Unterminated bool
}
