package format

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"strconv"

	"golang.org/x/image/draw"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// Thumbnails for the Files tab: an image scaled to fit a square, PNG
// when it has transparency and JPEG otherwise, kept in the files cache
// with the file's generation (a change to the file drops it).

// Thumbnail sizes.
const (
	DefaultThumbnail = 256
	MaxThumbnail     = 1024
)

// Thumb is a thumbnail to serve.
type Thumb struct {
	Data        []byte
	ContentType string
	// ETag is the thumbnail's strong validator: the file's content hash
	// and the size asked.
	ETag          string
	Width, Height int
}

// ThumbnailETag is the ETag of the thumbnail of size px of the content
// of hash (a request whose If-None-Match has it is answered 304 without
// reading the file).
func ThumbnailETag(hash string, px int) string { return `"` + hash + "-t" + strconv.Itoa(px) + `"` }

// Thumbnail returns the thumbnail of image p of fs, fitted into size x
// size pixels (never enlarged). A file that is not an image is
// EUnsupportedMedia (415); a broken or too large one EInvalid (422).
func Thumbnail(ctx context.Context, s *files.Service, fs *vfs.FS, p string, size int) (Thumb, error) {
	if size < 16 || size > MaxThumbnail {
		return Thumb{}, orchestrator.FieldErrorf("size", "size is 16 to %d pixels", MaxThumbnail)
	}
	t := &tier{s}
	src, err := t.read(ctx, files.Caller{FS: fs}, "path", p)
	if err != nil {
		return Thumb{}, err
	}
	v, err := s.Cache().Parsed(src.key, src.info.Gen, "thumb"+strconv.Itoa(size), func() (any, int64, error) {
		th, err := thumbnail(ctx, src, size)
		if err != nil {
			return nil, 0, err
		}
		return th, int64(len(th.Data)) + 256, nil
	})
	if err != nil {
		return Thumb{}, err
	}
	return v.(Thumb), nil
}

// thumbnail decodes src (not through the cache: a thumbnail is all that
// is kept of it) and scales it.
func thumbnail(ctx context.Context, src source, size int) (Thumb, error) {
	if _, _, err := imageHeader(src.path, src.data); err != nil {
		return Thumb{}, err
	}
	return guard(ctx, func() (Thumb, error) {
		img, _, err := image.Decode(bytes.NewReader(src.data))
		if err != nil {
			return Thumb{}, malformed(src.path, "image", err)
		}
		b := img.Bounds()
		w, h := fitSize(b.Dx(), b.Dy(), size, size)
		if w != b.Dx() || h != b.Dy() {
			// a large image first halves cheaply, then is resampled well
			for b.Dx() >= 4*w && b.Dy() >= 4*h {
				img = scale(img, b.Dx()/2, b.Dy()/2, draw.ApproxBiLinear)
				b = img.Bounds()
			}
			img = scale(img, w, h, draw.CatmullRom)
		}
		f := "png"
		if opaque(img) {
			f = "jpeg"
		}
		data, ct, err := encode(img, f, 80)
		if err != nil {
			return Thumb{}, fmt.Errorf("encode the thumbnail of %s: %w", src.path, err)
		}
		return Thumb{Data: data, ContentType: ct, ETag: ThumbnailETag(src.info.Hash, size), Width: w, Height: h}, nil
	})
}

func (t Thumb) AuditSummary() any {
	return map[string]any{"content_type": t.ContentType, "width": t.Width, "height": t.Height, "bytes": len(t.Data)}
}
