// Package gitssh serves git repositories over SSH on loopback for tests: a
// Go SSH server (golang.org/x/crypto/ssh) that runs git-receive-pack and
// git-upload-pack for the keys it was given, with a host key a test may
// change. It is apart from testkit, which imports only the standard
// library.
package gitssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Key is an SSH key pair made for a test.
type Key struct {
	// Private is the private key in OpenSSH PEM form, as a user pastes it.
	Private string
	// Public is the public key in authorized_keys form, without a comment.
	Public string
	Signer ssh.Signer
}

// NewKey makes an Ed25519 key pair.
func NewKey(t testing.TB) Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Private: string(pem.EncodeToMemory(block)), Public: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), Signer: signer}
}

// Server is a git SSH server on 127.0.0.1.
type Server struct {
	t    testing.TB
	root string
	ln   net.Listener

	mu       sync.Mutex
	hostKey  ssh.Signer
	accepted map[string]bool // authorized keys, by their wire form
	wg       sync.WaitGroup
}

// Serve serves the bare repositories under root to the holders of keys
// until the test ends: ssh://git@ADDR/NAME.git is root/NAME.git.
func Serve(t testing.TB, root string, keys ...ssh.PublicKey) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, root: root, ln: ln, hostKey: NewKey(t).Signer, accepted: map[string]bool{}}
	for _, k := range keys {
		s.accepted[string(k.Marshal())] = true
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the ssh:// URL of the repository root/name.
func (s *Server) URL(name string) string { return "ssh://git@" + s.Addr() + "/" + name }

// HostKey is the key the server presents now.
func (s *Server) HostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostKey.PublicKey()
}

// ChangeHostKey makes the server present a new host key from its next
// connection on (a server replaced, or a man in the middle).
func (s *Server) ChangeHostKey() {
	k := NewKey(s.t).Signer
	s.mu.Lock()
	s.hostKey = k
	s.mu.Unlock()
}

func (s *Server) config() *ssh.ServerConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.accepted[string(k.Marshal())] {
			return &ssh.Permissions{}, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(s.hostKey)
	return cfg
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
		}()
	}
}

func (s *Server) serve(c net.Conn) {
	defer c.Close()
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config())
	if err != nil {
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.session(ch, chReqs)
		}()
	}
}

// session runs one exec request: git-receive-pack or git-upload-pack of a
// repository under root.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" || len(req.Payload) < 4 {
			req.Reply(false, nil)
			continue
		}
		n := binary.BigEndian.Uint32(req.Payload)
		line := string(req.Payload[4:][:min(int(n), len(req.Payload)-4)])
		prog, arg, _ := strings.Cut(line, " ")
		arg = strings.Trim(arg, "'")
		dir := filepath.Join(s.root, filepath.Clean("/"+arg))
		if prog != "git-receive-pack" && prog != "git-upload-pack" {
			req.Reply(false, nil)
			continue
		}
		req.Reply(true, nil)
		cmd := exec.Command("git", strings.TrimPrefix(prog, "git-"), dir)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		code := 0
		if err := cmd.Run(); err != nil {
			code = 1
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
		}
		var status [4]byte
		binary.BigEndian.PutUint32(status[:], uint32(code))
		ch.SendRequest("exit-status", false, status[:])
		return
	}
}
