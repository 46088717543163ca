// Command testagent is a scriptable FAP agent for tests and benchmarks. It is
// built static (CGO_ENABLED=0) and runs as the only file of a FROM scratch
// image (images/testagent).
//
// It plays scripts: FILEPATH_TASK at start, then the content of each stdin
// message. Commands are separated by newlines or ';':
//
//	echo TEXT        a text event with TEXT
//	flood N          N text events "flood 1" .. "flood N", as fast as possible
//	bad              a malformed JSON line
//	huge N           a text event whose whole line is N bytes (plus the newline)
//	utf8             a line holding invalid UTF-8
//	crash N          write to stderr and exit with code N
//	ignore-stop      from now on ignore signal{stop} and SIGTERM
//	spawn N [AGENT]  N spawn events child-1..child-N (agent default: $FILEPATH_AGENT_TYPE or "testagent")
//	status S [PCT]   a status event with state S (and context_pct PCT)
//	tool             a tool start and a tool done event
//	command          a command start and a command done event
//	commit           a commit event
//	workers          a workers event listing the children spawned so far
//	handoff TEXT     a handoff event
//	done [TEXT]      a done event, then exit 0
//	sleep MS         wait MS milliseconds
//	stderr TEXT      write TEXT to stderr
//	rate N PERSEC    N text events "t <unix ns> <i>" (i = 1..N) at PERSEC per
//	                 second (0: as fast as possible), each stamped with the
//	                 time just before it is written (for latency benchmarks)
//	tree D W         if D > 0: spawn W children each told "tree D-1 W; done";
//	                 "tree 2 2" makes 2 children and 4 grandchildren
//
// Any other line is echoed back as a text event. signal{stop} emits
// done{"summary":"stopped"} and exits 0; signal{pause} and signal{resume}
// emit status idle and running. At stdin EOF it finishes its scripts and
// exits 0. Only the standard library is used, so it never depends on
// unreleased protocol API.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	a := &agent{out: bufio.NewWriterSize(os.Stdout, 64<<10), errw: os.Stderr, exit: os.Exit}
	os.Exit(a.run(os.Stdin, os.Getenv("FILEPATH_TASK")))
}

type agent struct {
	mu         sync.Mutex // guards out and children, and serialises exit
	out        *bufio.Writer
	errw       io.Writer
	exit       func(int)
	children   []string
	ignoreStop atomic.Bool
}

func (a *agent) run(stdin io.Reader, task string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		for range sigs {
			if a.ignoreStop.Load() {
				fmt.Fprintln(a.errw, "testagent: ignoring SIGTERM")
				continue
			}
			a.mu.Lock()
			a.out.Flush()
			fmt.Fprintln(a.errw, "testagent: SIGTERM")
			a.exit(143)
		}
	}()

	scripts := make(chan string, 64)
	finished := make(chan int)
	go func() {
		for s := range scripts {
			if code, exit := a.play(s); exit {
				finished <- code
				return
			}
		}
		finished <- 0
	}()
	if strings.TrimSpace(task) != "" {
		scripts <- task
	}

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(a.errw, "testagent: read stdin: %v\n", err)
		}
		close(lines)
	}()
	for {
		select {
		case code := <-finished:
			return code
		case line, ok := <-lines:
			if !ok {
				close(scripts)
				return <-finished
			}
			a.input(line, scripts)
		}
	}
}

// input handles one stdin line: messages queue a script, signals act at once.
func (a *agent) input(line string, scripts chan<- string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	var in struct {
		Type    string `json:"type"`
		From    string `json:"from"`
		Content string `json:"content"`
		Action  string `json:"action"`
	}
	if err := json.Unmarshal([]byte(line), &in); err != nil {
		fmt.Fprintf(a.errw, "testagent: bad input line: %v\n", err)
		return
	}
	switch {
	case in.Type == "message":
		scripts <- in.Content
	case in.Type == "signal" && in.Action == "stop":
		if a.ignoreStop.Load() {
			fmt.Fprintln(a.errw, "testagent: ignoring signal stop")
			return
		}
		a.emit(map[string]any{"type": "done", "summary": "stopped"})
		a.mu.Lock()
		a.exit(0)
	case in.Type == "signal" && in.Action == "pause":
		a.emit(map[string]any{"type": "status", "state": "idle"})
	case in.Type == "signal" && in.Action == "resume":
		a.emit(map[string]any{"type": "status", "state": "running"})
	default:
		fmt.Fprintf(a.errw, "testagent: unknown input %q\n", line)
	}
}

// play runs one script; exit reports that the agent must exit with code.
func (a *agent) play(script string) (code int, exit bool) {
	steps, err := Parse(script)
	if err != nil {
		fmt.Fprintf(a.errw, "testagent: %v\n", err)
		a.emit(map[string]any{"type": "text", "content": "testagent: " + err.Error()})
		return 0, false
	}
	for _, s := range steps {
		if code, exit := a.step(s); exit {
			return code, true
		}
	}
	return 0, false
}

func (a *agent) step(s Step) (code int, exit bool) {
	switch s.Op {
	case "echo":
		a.emit(map[string]any{"type": "text", "content": s.Args[0]})
	case "flood":
		for i := 1; i <= s.N; i++ {
			a.emit(map[string]any{"type": "text", "content": "flood " + strconv.Itoa(i)})
		}
	case "rate":
		a.rate(s.N, s.W)
	case "bad":
		a.raw([]byte(`{"type":"text","content":` + "\n"))
	case "huge":
		a.raw(hugeLine(s.N))
	case "utf8":
		a.raw([]byte("{\"type\":\"text\",\"content\":\"bad \xff\xfe utf8\"}\n"))
	case "crash":
		a.mu.Lock()
		a.out.Flush()
		a.mu.Unlock()
		fmt.Fprintf(a.errw, "testagent: crashing with exit code %d\n", s.N)
		return s.N, true
	case "ignore-stop":
		a.ignoreStop.Store(true)
	case "spawn":
		agent := os.Getenv("FILEPATH_AGENT_TYPE")
		if len(s.Args) > 1 {
			agent = s.Args[1]
		}
		if agent == "" {
			agent = "testagent"
		}
		for i := 1; i <= s.N; i++ {
			name := "child-" + strconv.Itoa(i)
			a.spawn(name, agent, "echo hello from "+name+"; done")
		}
	case "tree":
		if s.N > 0 {
			for i := 1; i <= s.W; i++ {
				a.spawn(fmt.Sprintf("d%d-%d", s.N, i), "", fmt.Sprintf("tree %d %d; done", s.N-1, s.W))
			}
		}
	case "status":
		ev := map[string]any{"type": "status", "state": s.Args[0]}
		if len(s.Args) > 1 {
			pct, _ := strconv.ParseFloat(s.Args[1], 64)
			ev["context_pct"] = pct
		}
		a.emit(ev)
	case "tool":
		a.emit(map[string]any{"type": "tool", "name": "read", "path": "/workspace/README.md", "status": "start"})
		a.emit(map[string]any{"type": "tool", "name": "read", "path": "/workspace/README.md", "status": "done", "output": "# readme"})
	case "command":
		a.emit(map[string]any{"type": "command", "cmd": "ls /workspace", "status": "start"})
		a.emit(map[string]any{"type": "command", "cmd": "ls /workspace", "status": "done", "exit": 0, "stdout": "README.md\n"})
	case "commit":
		a.emit(map[string]any{"type": "commit", "hash": "0123456789abcdef0123456789abcdef01234567", "message": "testagent commit"})
	case "workers":
		a.mu.Lock()
		ws := make([]map[string]string, 0, len(a.children))
		for _, c := range a.children {
			ws = append(ws, map[string]string{"name": c, "status": "running"})
		}
		a.mu.Unlock()
		a.emit(map[string]any{"type": "workers", "workers": ws})
	case "handoff":
		a.emit(map[string]any{"type": "handoff", "summary": s.Args[0]})
	case "done":
		ev := map[string]any{"type": "done"}
		if s.Args[0] != "" {
			ev["summary"] = s.Args[0]
		}
		a.emit(ev)
		return 0, true
	case "sleep":
		time.Sleep(time.Duration(s.N) * time.Millisecond)
	case "stderr":
		fmt.Fprintln(a.errw, s.Args[0])
	}
	return 0, false
}

func (a *agent) spawn(name, agent, task string) {
	if agent == "" {
		agent = os.Getenv("FILEPATH_AGENT_TYPE")
	}
	if agent == "" {
		agent = "testagent"
	}
	a.mu.Lock()
	a.children = append(a.children, name)
	a.mu.Unlock()
	a.emit(map[string]any{"type": "spawn", "name": name, "agent": agent, "model": os.Getenv("FILEPATH_MODEL"), "task": task})
}

// rate writes n timestamped text events at perSec per second (0: no pause).
// Event i is due at start + i/perSec; a late one is written at once.
func (a *agent) rate(n, perSec int) {
	start := time.Now()
	buf := make([]byte, 0, 64)
	for i := 1; i <= n; i++ {
		if perSec > 0 {
			due := start.Add(time.Duration(i-1) * time.Second / time.Duration(perSec))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		buf = append(buf[:0], `{"type":"text","content":"t `...)
		buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, "\"}\n"...)
		a.raw(buf)
	}
}

// hugeLine returns a text event line of exactly n bytes plus a newline (or
// n 'x' bytes when n is too small to hold the JSON around the content).
func hugeLine(n int) []byte {
	const head, tail = `{"type":"text","content":"`, `"}`
	if n < len(head)+len(tail) {
		return append([]byte(strings.Repeat("x", n)), '\n')
	}
	b := make([]byte, 0, n+1)
	b = append(b, head...)
	for len(b) < n-len(tail) {
		b = append(b, 'x')
	}
	b = append(b, tail...)
	return append(b, '\n')
}

func (a *agent) emit(ev map[string]any) {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		fmt.Fprintf(a.errw, "testagent: encode: %v\n", err)
		return
	}
	a.raw([]byte(buf.String()))
}

func (a *agent) raw(line []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.Write(line)
	a.out.Flush()
}
