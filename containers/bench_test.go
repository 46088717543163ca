package containers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// benchLines is how many lines one flood prints in the throughput benchmarks.
const benchLines = 200000

// BenchmarkLogsFollow measures lines/s from a flooding container through
// Logs(Follow) (container stdout -> json-file -> engine -> LogReader).
func BenchmarkLogsFollow(b *testing.B) {
	d, session, _ := dockerSession(b)
	ctx := context.Background()
	var lines, bytes int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := run(b, ctx, harness{rt: d}, Spec{SessionID: session, NodeID: "n" + strconv.Itoa(i), Image: testImage, Network: "none",
			Env: map[string]string{"FILEPATH_TASK": "sleep 300; flood " + strconv.Itoa(benchLines) + "; done"}})
		r := follow(b, ctx, d, id)
		b.StartTimer()
		n, nb := drain(b, r)
		b.StopTimer()
		r.Close()
		d.Remove(ctx, id)
		lines += n
		bytes += nb
		b.StartTimer()
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// BenchmarkLogsRead measures reading a finished container's whole log
// (no follow), which is what a restarted orchestrator does to catch up:
// through Logs and LogReader, and as the baseline the same API stream
// copied to io.Discard unparsed (the engine's own cost).
func BenchmarkLogsRead(b *testing.B) {
	d, session, _ := dockerSession(b)
	ctx := context.Background()
	id := run(b, ctx, harness{rt: d}, Spec{SessionID: session, NodeID: "n", Image: testImage, Network: "none",
		Env: map[string]string{"FILEPATH_TASK": "flood " + strconv.Itoa(benchLines) + "; done"}})
	if _, err := d.Wait(ctx, id); err != nil {
		b.Fatal(err)
	}
	b.Run("LogReader", func(b *testing.B) {
		var lines, bytes int
		for i := 0; i < b.N; i++ {
			r, err := d.Logs(ctx, id, LogOptions{Stdout: true})
			if err != nil {
				b.Fatal(err)
			}
			n, nb := drain(b, r)
			r.Close()
			lines += n
			bytes += nb
		}
		b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
		b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
	})
	b.Run("raw-api", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rc, err := d.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, Timestamps: true})
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, rc)
			rc.Close()
		}
		b.ReportMetric(float64(benchLines+1)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	})
}

// BenchmarkLogReader measures the frame parser alone on an in-memory log of
// flood lines.
func BenchmarkLogReader(b *testing.B) {
	var raw []byte
	t0 := time.Now()
	for i := 0; i < benchLines; i++ {
		raw = appendFrame(raw, Stdout, t0.Add(time.Duration(i)), []byte(`{"content":"flood `+strconv.Itoa(i)+`","type":"text"}`+"\n"))
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, _ := drain(b, NewLogReader(io.NopCloser(bytesReader(raw)), LogOptions{}))
		if n != benchLines {
			b.Fatalf("%d lines", n)
		}
	}
	b.ReportMetric(float64(benchLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkRawPipe is the baseline: the same agent and flood as a local
// process, its stdout read line by line from a pipe.
func BenchmarkRawPipe(b *testing.B) {
	agent := testAgent(b)
	var lines, bytes int
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(agent)
		cmd.Env = []string{"FILEPATH_TASK=flood " + strconv.Itoa(benchLines) + "; done"}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines++
			bytes += len(sc.Bytes())
		}
		cmd.Wait()
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
}

func drain(b *testing.B, r *LogReader) (lines, bytes int) {
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		lines++
		bytes += len(l.Line)
	}
}

// BenchmarkFirstLine measures Create+Start until the first stdout line
// arrives through Logs(Follow).
func BenchmarkFirstLine(b *testing.B) {
	d, session, _ := dockerSession(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		id := run(b, ctx, harness{rt: d}, Spec{SessionID: session, NodeID: "n" + strconv.Itoa(i), Image: testImage, Network: "none",
			Env: map[string]string{"FILEPATH_TASK": "echo hi; done"}})
		r := follow(b, ctx, d, id)
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		r.Close()
		d.Wait(ctx, id) // like the baseline: let it exit, then remove
		d.Remove(ctx, id)
		b.StartTimer()
	}
}

// BenchmarkFirstLineDockerRun is the baseline: `docker run` of the same
// image until its first stdout line, bare and with the flags Create uses.
func BenchmarkFirstLineDockerRun(b *testing.B) {
	if d := dockerRuntime(b); d == nil {
		b.Skip("docker disabled")
	}
	hardened := []string{"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--memory", "2g", "--cpus", "2",
		"--pids-limit", "512", "--init", "--log-opt", "max-size=32m", "--log-opt", "max-file=4"}
	for _, bc := range []struct {
		name  string
		flags []string
	}{{"bare", nil}, {"hardened", hardened}} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				args := append([]string{"run", "--rm", "--pull", "never", "--network", "none", "-e", "FILEPATH_TASK=echo hi; done"}, bc.flags...)
				cmd := exec.Command("docker", append(args, testImage)...)
				cmd.Stderr = os.Stderr
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if _, err := bufio.NewReader(out).ReadBytes('\n'); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				io.Copy(io.Discard, out)
				cmd.Wait()
				b.StartTimer()
			}
		})
	}
}
