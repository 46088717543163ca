package workspace

import "github.com/filepath-dev/filepath/orchestrator/vfs"

// The VFS vocabulary the mount speaks.
type (
	Attr       = vfs.Attr
	AttrChange = vfs.AttrChange
	DirEntry   = vfs.DirEntry
	Statfs     = vfs.Statfs
)
