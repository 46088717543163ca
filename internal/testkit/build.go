package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// once remembers, per key, the result of a build made once per test process.
type once struct {
	mu   sync.Mutex
	done map[string]*result
}

type result struct {
	sync.Once
	out string
	err error
}

func (o *once) do(key string, f func() (string, error)) (string, error) {
	o.mu.Lock()
	if o.done == nil {
		o.done = map[string]*result{}
	}
	r, ok := o.done[key]
	if !ok {
		r = &result{}
		o.done[key] = r
	}
	o.mu.Unlock()
	r.Do(func() { r.out, r.err = f() })
	return r.out, r.err
}

var programs, images once

// Program builds the Go package pkg (an import path, or a directory relative
// to the test's package such as "../../adapters/testagent") once per test
// process, static (CGO_ENABLED=0) so that it runs in a FROM-scratch or any
// Linux image, and returns the binary's path. The binary is kept between
// runs under $TMPDIR/filepath-testkit, one per package directory, replaced
// whole (an older one still running is untouched).
func Program(t testing.TB, pkg string) string {
	t.Helper()
	key := pkg
	if strings.HasPrefix(pkg, ".") {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			t.Fatal(err)
		}
		key = abs
	}
	bin, err := programs.do(key, func() (string, error) {
		sum := sha256.Sum256([]byte(key))
		dir := filepath.Join(os.TempDir(), "filepath-testkit", hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		bin := filepath.Join(dir, path.Base(filepath.ToSlash(key)))
		tmp, err := os.CreateTemp(dir, ".build-")
		if err != nil {
			return "", err
		}
		tmp.Close()
		defer os.Remove(tmp.Name())
		cmd := exec.Command("go", "build", "-trimpath", "-o", tmp.Name(), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return bin, os.Rename(tmp.Name(), bin)
	})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Image builds the Docker image tag once per test process from dockerfile
// and the files it copies (name in the build context → path on disk), with
// the classic builder (no registry is reachable for BuildKit's front ends).
// It fails the test (or skips it: see Missing) without a Docker engine.
func Image(t testing.TB, tag, dockerfile string, files map[string]string) {
	t.Helper()
	RequireDocker(t)
	_, err := images.do(tag, func() (string, error) {
		dir, err := os.MkdirTemp("", "filepath-image-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return "", err
		}
		for name, src := range files {
			if err := copyFile(src, filepath.Join(dir, name)); err != nil {
				return "", err
			}
		}
		cmd := exec.Command("docker", "build", "-q", "--force-rm", "-t", tag, dir)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("docker build %s: %v\n%s", tag, err, out)
		}
		return tag, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
