package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// Container start to the first FAP event, for the real Claude Code and
// Codex images, beside a bare start of the same image (`sh -c 'echo {}'`
// to its first line). The adapter (this tree's, mounted over the image's)
// gets a task and talks to internal/cmd/fakellm started inside the same
// --network none container on loopback, so the run also gives the time to
// the model's first text through the real CLI.
//
//	go test -run='^$' -bench=ContainerStart -benchtime=1x -count=5 ./adapters/cli/

func BenchmarkContainerStart(b *testing.B) {
	testkit.RequireDocker(b)
	adapter, fakellm := testkit.Program(b, "."), testkit.Program(b, "../../internal/cmd/fakellm")
	for _, agent := range []string{"claude-code", "codex"} {
		image := "filepath/agent-" + agent + ":latest"
		b.Run(agent+"/adapter", func(b *testing.B) {
			testkit.RequireImage(b, image)
			var first, text time.Duration
			for range b.N {
				f, t := startToEvents(b, "--init", "-v", adapter+":/usr/local/bin/filepath-cli-adapter:ro",
					"-v", fakellm+":/opt/fakellm:ro",
					"-e", "FILEPATH_TASK=Say hello.", "-e", "FILEPATH_API_URL=http://127.0.0.1:9999", "-e", "FILEPATH_API_KEY=fp_bench",
					"-e", "FILEPATH_MODEL="+map[string]string{"claude-code": "claude-sonnet-4-5", "codex": "gpt-5.5"}[agent],
					"--entrypoint", "/bin/sh", image, "-c", "/opt/fakellm --addr 127.0.0.1:9999 >/dev/null & exec /usr/local/bin/filepath-cli-adapter")
				first += f
				text += t
			}
			b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms/first-event")
			b.ReportMetric(float64(text.Milliseconds())/float64(b.N), "ms/first-text")
		})
		b.Run(agent+"/bare", func(b *testing.B) {
			testkit.RequireImage(b, image)
			var first time.Duration
			for range b.N {
				f, _ := startToEvents(b, "--entrypoint", "/bin/sh", image, "-c", "echo '{}'")
				first += f
			}
			b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms/first-event")
		})
	}
}

// startToEvents runs a hardened --network none container and returns the
// time from `docker run` to its first stdout line and to its first text
// event (0 when there is none); it ends the container with stdin's end.
func startToEvents(b *testing.B, args ...string) (first, text time.Duration) {
	b.Helper()
	name := fmt.Sprintf("filepath-bench-start-%d", time.Now().UnixNano())
	all := append([]string{"run", "-i", "--rm", "--name", name, "--network", "none", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges"}, args...)
	cmd := exec.Command("docker", all...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			exec.Command("docker", "rm", "-f", name).Run()
			<-done
		}
	}()
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 4<<20)
	wantText := strings.Contains(strings.Join(args, " "), "filepath-cli-adapter")
	for sc.Scan() {
		if first == 0 {
			first = time.Since(start)
		}
		if strings.Contains(sc.Text(), `"type":"text"`) {
			text = time.Since(start)
		}
		if !wantText || text > 0 {
			return first, text
		}
	}
	b.Fatalf("the container ended without a line (first %v)", first)
	return
}
