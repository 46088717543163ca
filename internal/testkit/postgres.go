package testkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// TestDatabaseVar selects the database the store and vfs suites run on:
// "postgres" runs them on PostgreSQL (PostgresURL), anything else on
// SQLite files.
const TestDatabaseVar = "FILEPATH_TEST_DATABASE"

// PostgresURLVar names a running PostgreSQL server (a postgres:// URL of a
// superuser) that PostgresURL uses instead of starting its own cluster.
const PostgresURLVar = "FILEPATH_TEST_POSTGRES_URL"

// OnPostgres reports whether the suites run on PostgreSQL
// (FILEPATH_TEST_DATABASE=postgres).
func OnPostgres() bool { return os.Getenv(TestDatabaseVar) == "postgres" }

var pgByKey struct {
	sync.Mutex
	urls map[string]string
}

// PostgresURLFor is PostgresURL, the same database for the same key in
// this process (a test that reopens its "database file" reopens the same
// database); it is dropped when the test that made it ends.
func PostgresURLFor(t testing.TB, key string) string {
	t.Helper()
	pgByKey.Lock()
	defer pgByKey.Unlock()
	if u, ok := pgByKey.urls[key]; ok {
		return u
	}
	u := PostgresURL(t)
	if pgByKey.urls == nil {
		pgByKey.urls = map[string]string{}
	}
	pgByKey.urls[key] = u
	t.Cleanup(func() {
		pgByKey.Lock()
		delete(pgByKey.urls, key)
		pgByKey.Unlock()
	})
	return u
}

var pgCluster struct {
	once sync.Once
	url  string // the server's postgres database, as a superuser
	err  error
}

// PostgresURL returns the URL of a new empty database (UTF8, C collation)
// that is dropped when t ends. The server is FILEPATH_TEST_POSTGRES_URL's
// when set; otherwise the test process starts one cluster of its own, once
// (initdb and postgres, as the postgres user when run as root, in a
// temporary directory, on a loopback port), which ends with the process.
// Without PostgreSQL the test is skipped, and fails under CI.
func PostgresURL(t testing.TB) string {
	t.Helper()
	pgCluster.once.Do(func() {
		if u := os.Getenv(PostgresURLVar); u != "" {
			pgCluster.url = u
			return
		}
		pgCluster.url, pgCluster.err = startCluster()
	})
	if pgCluster.err != nil {
		Missing(t, "PostgreSQL ("+pgCluster.err.Error()+")")
	}
	admin, err := sql.Open("pgx", pgCluster.url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", pgCluster.url)
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close()
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	return replaceDB(pgCluster.url, name)
}

// replaceDB is url with its database name replaced by name.
func replaceDB(url, name string) string {
	base, query, _ := strings.Cut(url, "?")
	if i := strings.LastIndexByte(base, '/'); i > len("postgres://") {
		base = base[:i]
	}
	if query != "" {
		return base + "/" + name + "?" + query
	}
	return base + "/" + name
}

// pgBin finds a PostgreSQL program on PATH or in Debian's directory.
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(ms) > 0 {
		return ms[len(ms)-1], nil
	}
	return "", fmt.Errorf("%s not found (scripts/deps.sh installs postgresql-15)", name)
}

const clusterPrefix = "filepath-testpg-"

// startCluster starts this process's PostgreSQL cluster and returns the
// URL of its postgres database.
func startCluster() (string, error) {
	initdb, err := pgBin("initdb")
	if err != nil {
		return "", err
	}
	postgres, err := pgBin("postgres")
	if err != nil {
		return "", err
	}
	sweepClusters()
	dir, err := os.MkdirTemp("", clusterPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // postgres refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "--no-locale", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	// A throwaway cluster: no durability, so tests do not wait for disks.
	srv := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return "", err
	}
	srv.Stdout, srv.Stderr = logf, logf
	started, exited := make(chan error, 1), make(chan struct{})
	go func() {
		// Pdeathsig follows the thread that started the child: keep it.
		runtime.LockOSThread()
		if err := srv.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = srv.Wait()
		logf.Close()
		close(exited)
	}()
	if err := <-started; err != nil {
		return "", fmt.Errorf("start postgres: %w", err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	db, err := sql.Open("pgx", url)
	if err != nil {
		return "", err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return url, nil
		}
		select {
		case <-exited:
			deadline = time.Time{}
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return "", fmt.Errorf("postgres did not start: %v: %s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sweepClusters removes the directories of clusters whose test process is
// gone (their server ended with it).
func sweepClusters() {
	ms, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterPrefix+"*"))
	for _, m := range ms {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(m), clusterPrefix), "-")
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
			_ = os.RemoveAll(m)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
