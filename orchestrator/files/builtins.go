package files

import (
	"context"
	"encoding/json"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// The built-in tools: files.md's meta-tools (file_*), raw bytes, and the
// session's key-value store (kv_*). Argument names are files.md's; a
// file's id is its path in the workspace.

const idDoc = "the file's path in the workspace, e.g. /notes/a.md (/workspace/notes/a.md and notes/a.md work too)"

// Arguments of the built-in tools.
type (
	FileID struct {
		ID string `json:"id" jsonschema_description:"the file's path in the workspace, e.g. /notes/a.md (/workspace/notes/a.md and notes/a.md work too)"`
	}
	ListArgs struct {
		Pattern string `json:"pattern,omitempty" jsonschema_description:"a glob matched against the path (below /) and the name: * and ? within a name, [abc], ** for any directories (e.g. **/*.csv); empty: every file"`
	}
	ReadTextArgs struct {
		FileID
		StartLine int `json:"start_line,omitempty" jsonschema_description:"first line to read (1-based); omit to start from the beginning"`
		EndLine   int `json:"end_line,omitempty" jsonschema_description:"last line to read (inclusive); omit to read to the end"`
	}
	IfMatch struct {
		IfMatch string `json:"if_match,omitempty" jsonschema_description:"the hash the file must have (from the read you based the edit on); if it changed since, nothing is written and the error gives the current hash"`
	}
	WriteTextArgs struct {
		FileID
		Content string `json:"content" jsonschema_description:"full text content to write"`
		IfMatch
	}
	ReplaceLinesArgs struct {
		FileID
		StartLine int    `json:"start_line" jsonschema_description:"first line to replace (1-based)"`
		EndLine   int    `json:"end_line" jsonschema_description:"last line to replace (inclusive)"`
		Content   string `json:"content" jsonschema_description:"replacement text (its lines; empty deletes the range)"`
		IfMatch
	}
	InsertLinesArgs struct {
		FileID
		AfterLine int    `json:"after_line" jsonschema_description:"insert after this line (0: at the start; the line count: at the end)"`
		Content   string `json:"content" jsonschema_description:"the lines to insert"`
		IfMatch
	}
	DeleteLinesArgs struct {
		FileID
		StartLine int `json:"start_line" jsonschema_description:"first line to delete (1-based)"`
		EndLine   int `json:"end_line" jsonschema_description:"last line to delete (inclusive)"`
		IfMatch
	}
	SearchTextArgs struct {
		FileID
		Pattern    string `json:"pattern" jsonschema_description:"a regular expression (RE2 syntax, e.g. (?i)total\\s+\\d+)"`
		MaxResults int    `json:"max_results,omitempty" jsonschema_description:"at most this many matching lines (default 100, at most 1000)"`
	}
	CreateArgs struct {
		Name     string `json:"name" jsonschema_description:"the new file's path in the workspace (parents are created)"`
		Content  string `json:"content,omitempty" jsonschema_description:"optional initial text content"`
		MimeType string `json:"mime_type,omitempty" jsonschema_description:"optional MIME type; detected from the content if omitted"`
	}
	RenameArgs struct {
		FileID
		NewName string `json:"new_name" jsonschema_description:"a new name in the same directory, or a path in the workspace; must not exist"`
	}
	DownloadArgs struct {
		URL      string `json:"url" jsonschema_description:"URL to download (http or https, a public host)"`
		Filename string `json:"filename,omitempty" jsonschema_description:"optional path in the workspace; inferred from the URL if omitted; a file there is replaced"`
	}
	ReadBytesArgs struct {
		FileID
		Offset int64 `json:"offset" jsonschema_description:"first byte (0-based)"`
		Length int   `json:"length" jsonschema_description:"how many bytes (at most 1048576)"`
	}
	WriteBytesArgs struct {
		FileID
		Offset int64  `json:"offset" jsonschema_description:"where the bytes go (past the end: the gap is zero-filled)"`
		Data   string `json:"data" jsonschema_description:"the bytes, base64"`
		IfMatch
	}
	AppendBytesArgs struct {
		FileID
		Data string `json:"data" jsonschema_description:"the bytes, base64"`
		IfMatch
	}
	KVKeyArgs struct {
		Key string `json:"key" jsonschema_description:"the key"`
	}
	KVSetArgs struct {
		Key   string          `json:"key" jsonschema_description:"the key (at most 512 bytes)"`
		Value json.RawMessage `json:"value" jsonschema_description:"any JSON value (at most 256 KiB)"`
	}
	KVListArgs struct {
		Prefix string `json:"prefix,omitempty" jsonschema_description:"only keys that start with this"`
	}
)

// file runs op on the cleaned path of id for a caller that reaches files.
func file[T any](c Caller, id string, op func(fs *vfs.FS, p string) (T, error)) (T, error) {
	var zero T
	if c.FS == nil {
		return zero, orchestrator.Errorf(orchestrator.EForbidden, "this caller reaches no files")
	}
	p, err := CleanID("id", id)
	if err != nil {
		return zero, err
	}
	return op(c.FS, p)
}

func (s *Service) builtins() []Tool {
	return []Tool{
		Define("file_list", "List the files of the workspace (recursively; .git skipped unless the pattern names it), optionally filtered by a glob: id (path), name, size, MIME type, modified time. At most 1000.", true,
			func(ctx context.Context, c Caller, in ListArgs) (FileList, error) {
				return file(c, "/", func(fs *vfs.FS, _ string) (FileList, error) { return s.List(ctx, fs, "/", in.Pattern) })
			}).WithRoute("list"),
		Define("file_info", "Full metadata of a file: size, MIME type (detected from its content), source (upload: a person's; created: an agent's; derived: a copy), the node that wrote it, sha256 hash, times, readonly.", true,
			func(ctx context.Context, c Caller, in FileID) (Info, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Info, error) { return s.FileInfo(ctx, fs, p) })
			}).WithRoute("info"),
		Define("file_read_text", "Read a text file, whole or a range of lines, with the total line count and the file's hash (pass it as if_match to an edit). At most 256 KiB per call: a longer range ends early with truncated set; read on from end_line + 1.", true,
			func(ctx context.Context, c Caller, in ReadTextArgs) (TextRead, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (TextRead, error) {
					return s.ReadText(ctx, fs, p, in.StartLine, in.EndLine)
				})
			}).WithRoute("read_text"),
		Define("file_write_text", "Overwrite a whole text file (created, with its directories, when missing). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c Caller, in WriteTextArgs) (TextEdit, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (TextEdit, error) {
					return s.WriteText(ctx, fs, p, in.Content, in.IfMatch.IfMatch)
				})
			}).WithRoute("write_text"),
		Define("file_replace_lines", "Replace lines start_line to end_line (inclusive) of a text file with content. With if_match, only if the file still has that hash (the one file_read_text gave).", false,
			func(ctx context.Context, c Caller, in ReplaceLinesArgs) (TextEdit, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (TextEdit, error) {
					return s.ReplaceLines(ctx, fs, p, in.StartLine, in.EndLine, in.Content, in.IfMatch.IfMatch)
				})
			}).WithRoute("replace_lines"),
		Define("file_insert_lines", "Insert lines into a text file after line after_line (0: at the start). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c Caller, in InsertLinesArgs) (TextEdit, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (TextEdit, error) {
					return s.InsertLines(ctx, fs, p, in.AfterLine, in.Content, in.IfMatch.IfMatch)
				})
			}).WithRoute("insert_lines"),
		Define("file_delete_lines", "Delete lines start_line to end_line (inclusive) of a text file. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c Caller, in DeleteLinesArgs) (TextEdit, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (TextEdit, error) {
					return s.DeleteLines(ctx, fs, p, in.StartLine, in.EndLine, in.IfMatch.IfMatch)
				})
			}).WithRoute("delete_lines"),
		Define("file_search_text", "Search a text file for a regular expression (RE2): the matching lines with their numbers, at most max_results, each cut to 500 bytes.", true,
			func(ctx context.Context, c Caller, in SearchTextArgs) (SearchResult, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (SearchResult, error) {
					return s.SearchText(ctx, fs, p, in.Pattern, in.MaxResults)
				})
			}).WithRoute("search_text"),
		Define("file_line_count", "The number of lines of a text file, its size and hash.", true,
			func(ctx context.Context, c Caller, in FileID) (LineCount, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (LineCount, error) { return s.CountLines(ctx, fs, p) })
			}).WithRoute("line_count"),
		Define("file_create", "Create a new file (it must not exist; directories are created) with optional text content.", false,
			func(ctx context.Context, c Caller, in CreateArgs) (Named, error) {
				return file(c, in.Name, func(fs *vfs.FS, p string) (Named, error) { return s.Create(ctx, fs, p, in.Content, in.MimeType) })
			}),
		Define("file_delete", "Delete a file (or an empty directory).", false,
			func(ctx context.Context, c Caller, in FileID) (Deleted, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Deleted, error) { return s.Delete(ctx, fs, p) })
			}),
		Define("file_copy", "Copy a file (a directory with everything in it) to new_name: a name beside it, or a path. The copy's source is derived.", false,
			func(ctx context.Context, c Caller, in RenameArgs) (Named, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Named, error) { return s.Copy(ctx, fs, p, in.NewName) })
			}),
		Define("file_rename", "Rename or move a file to new_name: a name beside it, or a path.", false,
			func(ctx context.Context, c Caller, in RenameArgs) (Named, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Named, error) { return s.Rename(ctx, fs, p, in.NewName) })
			}),
		Define("file_download", "Download a URL (http or https, a public host) into the workspace; the server fetches it. Redirects are followed only on the same host. Returns the file's id, size and MIME type.", false,
			func(ctx context.Context, c Caller, in DownloadArgs) (Downloaded, error) {
				return file(c, "/", func(fs *vfs.FS, _ string) (Downloaded, error) { return s.Download(ctx, fs, in.URL, in.Filename) })
			}),
		Define("file_read_bytes", "Read a range of a file's raw bytes, base64 (for files that are not text and have no format tool).", true,
			func(ctx context.Context, c Caller, in ReadBytesArgs) (Bytes, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Bytes, error) { return s.ReadBytes(ctx, fs, p, in.Offset, in.Length) })
			}).WithRoute("read_bytes"),
		Define("file_write_bytes", "Write base64 bytes at an offset of a file (created when missing; a gap past its end is zero-filled). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c Caller, in WriteBytesArgs) (Written, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Written, error) {
					return s.WriteBytes(ctx, fs, p, in.Offset, in.Data, in.IfMatch.IfMatch)
				})
			}).WithRoute("write_bytes"),
		Define("file_append_bytes", "Append base64 bytes to a file (created when missing). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c Caller, in AppendBytesArgs) (Written, error) {
				return file(c, in.ID, func(fs *vfs.FS, p string) (Written, error) {
					return s.AppendBytes(ctx, fs, p, in.Data, in.IfMatch.IfMatch)
				})
			}).WithRoute("append_bytes"),
		Define("kv_get", "Read a value of the session's key-value store (shared by the session's agents and its user).", true,
			func(ctx context.Context, c Caller, in KVKeyArgs) (KVValue, error) {
				return s.KVGet(ctx, c.SessionID, in.Key)
			}),
		Define("kv_set", "Store a JSON value under a key in the session's key-value store (replacing one there).", false,
			func(ctx context.Context, c Caller, in KVSetArgs) (KVValue, error) {
				return s.KVSet(ctx, c.SessionID, in.Key, in.Value)
			}),
		Define("kv_list", "List the keys of the session's key-value store (with their times, without values), optionally those with a prefix.", true,
			func(ctx context.Context, c Caller, in KVListArgs) (KVKeys, error) {
				return s.KVList(ctx, c.SessionID, in.Prefix)
			}),
		Define("kv_delete", "Delete a key of the session's key-value store.", false,
			func(ctx context.Context, c Caller, in KVKeyArgs) (KVDeleted, error) {
				return s.KVDelete(ctx, c.SessionID, in.Key)
			}),
	}
}

// Builtins returns the definitions of the built-in tools (to document
// them; a Service serves its own).
func Builtins() []Tool { return (&Service{}).builtins() }
