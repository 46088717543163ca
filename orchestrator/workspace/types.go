package workspace

import "github.com/filepath-dev/filepath/orchestrator/vfs"

// The VFS vocabulary the mount speaks.
type (
	Attr       = vfs.Attr
	AttrChange = vfs.AttrChange
	DirEntry   = vfs.DirEntry
	// DirEntryAttr is a listed entry with its attributes.
	DirEntryAttr = vfs.DirEntryAttr
	Statfs       = vfs.Statfs
)
