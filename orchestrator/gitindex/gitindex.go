// Package gitindex rewrites the stat data of a git index (.git/index):
// after a checkout is copied to another filesystem, the index can say what
// the files' stat there is, so that git trusts them without reading them
// again. It does no I/O.
package gitindex

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"time"
)

// Stat is what an index entry records of a file's lstat: git compares
// them (core.checkStat, core.trustctime) to tell a file unchanged without
// reading it. Times are kept in seconds and nanoseconds, the rest in 32
// bits, as the index has them.
type Stat struct {
	Ctime, Mtime time.Time
	Dev, Ino     uint32
	UID, GID     uint32
	Size         uint32
}

// Restat returns index with the stat data of each entry whose path stat
// knows replaced (the other entries are kept as they are: submodules,
// entries outside the sparse checkout), and the checksum computed again.
// It reads index versions 2 to 4 of SHA-1 and SHA-256 repositories (told
// apart by the checksum), and returns how many entries it changed.
func Restat(index []byte, stat func(path string) (Stat, bool)) ([]byte, int, error) {
	if len(index) < 12 || string(index[:4]) != "DIRC" {
		return nil, 0, errors.New("gitindex: not a git index")
	}
	version := binary.BigEndian.Uint32(index[4:8])
	if version < 2 || version > 4 {
		return nil, 0, fmt.Errorf("gitindex: index version %d is not supported", version)
	}
	var hashLen int
	var sum func() hash.Hash
	for _, h := range []struct {
		n   int
		new func() hash.Hash
	}{{sha1.Size, sha1.New}, {sha256.Size, sha256.New}} {
		if len(index) < 12+h.n {
			continue
		}
		s := h.new()
		s.Write(index[:len(index)-h.n])
		if bytes.Equal(s.Sum(nil), index[len(index)-h.n:]) {
			hashLen, sum = h.n, h.new
			break
		}
	}
	if sum == nil {
		return nil, 0, errors.New("gitindex: the index's checksum does not match (neither SHA-1 nor SHA-256)")
	}
	out := bytes.Clone(index)
	body := out[:len(out)-hashLen]
	n := binary.BigEndian.Uint32(index[8:12])
	pos, changed := 12, 0
	var prev []byte // v4: the previous entry's path
	for i := uint32(0); i < n; i++ {
		start := pos
		fixed := 40 + hashLen + 2
		if pos+fixed > len(body) {
			return nil, 0, fmt.Errorf("gitindex: entry %d is cut short", i)
		}
		flags := binary.BigEndian.Uint16(body[pos+40+hashLen:])
		pos += fixed
		if flags&0x4000 != 0 { // extended (v3+): 16 more bits of flags
			if version < 3 {
				return nil, 0, fmt.Errorf("gitindex: entry %d has extended flags in a version %d index", i, version)
			}
			pos += 2
		}
		var path []byte
		if version == 4 {
			strip, w := gitVarint(body[pos:])
			if w <= 0 || int(strip) > len(prev) {
				return nil, 0, fmt.Errorf("gitindex: entry %d: bad path prefix", i)
			}
			pos += w
			end := bytes.IndexByte(body[pos:], 0)
			if end < 0 {
				return nil, 0, fmt.Errorf("gitindex: entry %d: path not terminated", i)
			}
			path = append(bytes.Clone(prev[:len(prev)-int(strip)]), body[pos:pos+end]...)
			pos += end + 1
		} else {
			end := bytes.IndexByte(body[pos:], 0)
			if end < 0 {
				return nil, 0, fmt.Errorf("gitindex: entry %d: path not terminated", i)
			}
			path = body[pos : pos+end]
			// NUL-padded to a multiple of 8 bytes from the entry's start
			pos = start + (pos+end-start+8)&^7
		}
		prev = path
		st, ok := stat(string(path))
		if !ok {
			continue
		}
		e := body[start:]
		put := binary.BigEndian.PutUint32
		put(e[0:], uint32(st.Ctime.Unix()))
		put(e[4:], uint32(st.Ctime.Nanosecond()))
		put(e[8:], uint32(st.Mtime.Unix()))
		put(e[12:], uint32(st.Mtime.Nanosecond()))
		put(e[16:], st.Dev)
		put(e[20:], st.Ino)
		put(e[28:], st.UID)
		put(e[32:], st.GID)
		put(e[36:], st.Size)
		changed++
	}
	if pos > len(body) {
		return nil, 0, errors.New("gitindex: the entries run past the index")
	}
	s := sum()
	s.Write(body)
	copy(out[len(out)-hashLen:], s.Sum(nil))
	return out, changed, nil
}

// gitVarint reads git's offset varint (varint.c): 7 bits a byte, most
// significant first, each continuation adding one.
func gitVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 0x7f)
	i := 1
	for c&0x80 != 0 {
		if i >= len(b) || i > 9 {
			return 0, 0
		}
		c = b[i]
		i++
		v = ((v + 1) << 7) | uint64(c&0x7f)
	}
	return v, i
}
