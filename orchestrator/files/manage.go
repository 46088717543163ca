package files

import (
	"context"
	"encoding/base64"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// Files by path (files.md "Tier 1"), and raw bytes (its escape hatch). A
// file's id is its path in the workspace: "/notes/a.md" (in an agent's
// container /workspace/notes/a.md; both are accepted, and "notes/a.md").

// CleanID turns a file id as a caller gives it into a session path.
func CleanID(field, id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", orchestrator.FieldErrorf(field, "%s is required: the file's path in the workspace, e.g. /notes/a.md", field)
	}
	if rest, ok := strings.CutPrefix(id, paths.WorkspaceRoot); ok && (rest == "" || rest[0] == '/') {
		id = rest
	}
	if !strings.HasPrefix(id, "/") {
		id = "/" + id
	}
	p, err := paths.CleanPath(id)
	if err != nil {
		return "", &orchestrator.Error{Code: orchestrator.ErrorCode(err), Field: field, Message: orchestrator.ErrorMessage(err)}
	}
	return p, nil
}

// Entry is a file as file_list shows it.
type Entry struct {
	ID         string    `json:"id" jsonschema_description:"the file's path in the workspace"`
	Name       string    `json:"name"`
	Size       int64     `json:"size"`
	MimeType   string    `json:"mime_type"`
	ModifiedOn time.Time `json:"modified_on"`
}

// FileList is file_list's answer.
type FileList struct {
	Files     []Entry `json:"files"`
	Truncated bool    `json:"truncated,omitempty" jsonschema_description:"more files match than one answer holds"`
}

func (l FileList) AuditSummary() any {
	return map[string]any{"files": len(l.Files), "truncated": l.Truncated}
}

// listVisit bounds the entries one listing looks at.
const listVisit = 200000

// List returns the regular files under dir (recursively; "" or "/": the
// whole workspace) whose path or name matches glob pattern ("": all),
// at most MaxListResults, in path order. .git is skipped unless the
// pattern names it.
func (s *Service) List(ctx context.Context, fs *vfs.FS, dir, pattern string) (FileList, error) {
	var re *regexp.Regexp
	if pattern != "" {
		var err error
		if re, err = globRegexp(pattern); err != nil {
			return FileList{}, err
		}
	}
	if dir == "" {
		dir = "/"
	}
	out := FileList{Files: []Entry{}}
	visited := 0
	var walk func(d string) error
	walk = func(d string) error {
		kids, err := fs.List(ctx, d)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if visited++; visited > listVisit || len(out.Files) == MaxListResults {
				out.Truncated = true
				return nil
			}
			rel := strings.TrimPrefix(k.Path, "/")
			if k.IsDir {
				if k.Name == ".git" && !strings.Contains(pattern, ".git") {
					continue
				}
				if err := walk(k.Path); err != nil {
					return err
				}
				continue
			}
			if k.IsSymlink || (re != nil && !re.MatchString(rel) && !re.MatchString(k.Name)) {
				continue
			}
			m, err := fs.MetaOf(ctx, k)
			if err != nil {
				return err
			}
			out.Files = append(out.Files, Entry{ID: k.Path, Name: k.Name, Size: k.Size, MimeType: m.MimeType, ModifiedOn: k.UpdatedAt})
		}
		return nil
	}
	if err := walk(dir); err != nil {
		return FileList{}, err
	}
	return out, nil
}

// globRegexp compiles a glob: * and ? within a name, [...] classes, ** for
// any number of directories.
func globRegexp(glob string) (*regexp.Regexp, error) {
	if len(glob) > MaxPattern {
		return nil, orchestrator.FieldErrorf("pattern", "pattern is longer than %d bytes", MaxPattern)
	}
	glob = strings.TrimPrefix(strings.TrimPrefix(glob, paths.WorkspaceRoot), "/")
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			if strings.HasPrefix(glob[i:], "**/") {
				b.WriteString("(?:.*/)?")
				i += 2
			} else if strings.HasPrefix(glob[i:], "**") {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := strings.IndexByte(glob[i:], ']')
			if j < 0 {
				return nil, orchestrator.FieldErrorf("pattern", "pattern %q has an unclosed [", glob)
			}
			class := glob[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, orchestrator.FieldErrorf("pattern", "pattern %q is not a valid glob: %v", glob, err)
	}
	return re, nil
}

// Info is a file's metadata as file_info shows it.
type Info struct {
	ID string `json:"id" jsonschema_description:"the file's path in the workspace"`
	vfs.Detail
}

// FileInfo returns the metadata of p.
func (s *Service) FileInfo(ctx context.Context, fs *vfs.FS, p string) (Info, error) {
	d, err := fs.Info(ctx, p)
	if err != nil {
		return Info{}, err
	}
	return Info{ID: d.Path, Detail: d}, nil
}

// Named is a file made or moved: its id and name.
type Named struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Create makes file p with content (it must not exist; parents are
// created). A mime type, when given, is recorded until the content changes.
func (s *Service) Create(ctx context.Context, fs *vfs.FS, p, content, mime string) (Named, error) {
	info, _, err := fs.WriteFile(ctx, p, []byte(content), vfs.WriteOptions{Mode: vfs.WriteCreate})
	if err != nil {
		return Named{}, err
	}
	if mime != "" {
		if err := fs.SetMIME(ctx, info.Path, mime); err != nil {
			return Named{}, err
		}
	}
	return Named{ID: info.Path, Name: info.Name}, nil
}

// Deleted is file_delete's answer.
type Deleted struct {
	Deleted bool `json:"deleted" jsonschema_description:"false: there was no such file"`
}

// Delete removes file p (an empty directory too; a directory with files
// in it is refused).
func (s *Service) Delete(ctx context.Context, fs *vfs.FS, p string) (Deleted, error) {
	err := fs.Delete(ctx, p, false)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return Deleted{}, nil
	}
	return Deleted{Deleted: err == nil}, err
}

// target is where a copy or rename of p to newName goes: newName is a path
// when it has a slash, else a name beside p.
func target(p, newName string) (string, error) {
	if strings.Contains(newName, "/") {
		return CleanID("new_name", newName)
	}
	if err := paths.ValidName(newName); err != nil {
		return "", &orchestrator.Error{Code: orchestrator.EInvalid, Field: "new_name", Message: orchestrator.ErrorMessage(err)}
	}
	return paths.Join(path.Dir(p), newName), nil
}

// Copy copies p to newName (which must not exist).
func (s *Service) Copy(ctx context.Context, fs *vfs.FS, p, newName string) (Named, error) {
	dst, err := target(p, newName)
	if err != nil {
		return Named{}, err
	}
	info, err := fs.Copy(ctx, p, dst)
	if err != nil {
		return Named{}, err
	}
	return Named{ID: info.Path, Name: info.Name}, nil
}

// Rename moves p to newName (which must not exist).
func (s *Service) Rename(ctx context.Context, fs *vfs.FS, p, newName string) (Named, error) {
	dst, err := target(p, newName)
	if err != nil {
		return Named{}, err
	}
	info, err := fs.Move(ctx, p, dst)
	if err != nil {
		return Named{}, err
	}
	return Named{ID: info.Path, Name: info.Name}, nil
}

// Bytes is a range of a file's bytes.
type Bytes struct {
	Data   string `json:"data" jsonschema_description:"the bytes, base64"`
	Offset int64  `json:"offset"`
	Length int    `json:"length" jsonschema_description:"bytes returned: fewer than asked at the end of the file"`
	Size   int64  `json:"size" jsonschema_description:"the file's size"`
	Hash   string `json:"hash"`
}

func (b Bytes) AuditSummary() any {
	return map[string]any{"offset": b.Offset, "length": b.Length, "size": b.Size}
}

// ReadBytes returns up to length bytes (at most MaxBytesRead) of p at offset.
func (s *Service) ReadBytes(ctx context.Context, fs *vfs.FS, p string, offset int64, length int) (Bytes, error) {
	if length <= 0 || length > MaxBytesRead {
		return Bytes{}, orchestrator.FieldErrorf("length", "length must be 1 to %d", MaxBytesRead)
	}
	info, b, err := fs.ReadRange(ctx, p, offset, length)
	if err != nil {
		return Bytes{}, err
	}
	return Bytes{Data: base64.StdEncoding.EncodeToString(b), Offset: offset, Length: len(b), Size: info.Size, Hash: info.Hash}, nil
}

// Written is the outcome of a write of bytes.
type Written struct {
	OK   bool   `json:"ok"`
	Size int64  `json:"size" jsonschema_description:"the file's size after the write"`
	Hash string `json:"hash"`
}

func decodeData(data string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, orchestrator.FieldErrorf("data", "data is not valid base64: %v", err)
	}
	return b, nil
}

// WriteBytes writes base64 data at offset into p (created when missing;
// a gap past its end is zero-filled).
func (s *Service) WriteBytes(ctx context.Context, fs *vfs.FS, p string, offset int64, data, ifMatch string) (Written, error) {
	return s.writeBytes(ctx, fs, p, offset, data, vfs.WriteAtOptions{Create: true, IfMatch: ifMatch})
}

// AppendBytes appends base64 data to p (created when missing).
func (s *Service) AppendBytes(ctx context.Context, fs *vfs.FS, p, data, ifMatch string) (Written, error) {
	return s.writeBytes(ctx, fs, p, 0, data, vfs.WriteAtOptions{Create: true, Append: true, IfMatch: ifMatch})
}

func (s *Service) writeBytes(ctx context.Context, fs *vfs.FS, p string, offset int64, data string, o vfs.WriteAtOptions) (Written, error) {
	b, err := decodeData(data)
	if err != nil {
		return Written{}, err
	}
	info, err := fs.WriteAtPath(ctx, p, b, offset, o)
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.EPreconditionFailed {
			if cur, perr := fs.Stat(ctx, p); perr == nil {
				return Written{}, changed(cur.Path, cur.Hash)
			}
		}
		return Written{}, err
	}
	return Written{OK: true, Size: info.Size, Hash: info.Hash}, nil
}
