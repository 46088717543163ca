package format

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"strings"
	"testing"

	_ "golang.org/x/image/webp"

	"github.com/filepath-dev/filepath/orchestrator"
)

func decodeImage(t *testing.T, b []byte) (image.Image, string) {
	t.Helper()
	img, f, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return img, f
}

func TestThumbnail(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/photo.jpg", jpegOf(t, gradient(1200, 800, false)))
	f.put(t, "/logo.png", pngOf(t, gradient(300, 600, true)))
	f.put(t, "/small.webp", webpOf(t, gradient(40, 20, false)))
	f.put(t, "/notes.txt", []byte("not an image"))
	f.put(t, "/broken.png", pngOf(t, gradient(50, 50, false))[:60])
	for _, c := range []struct {
		name, path string
		size, w, h int
		ct         string
	}{
		{"a photo fits the square, as JPEG", "/photo.jpg", 256, 256, 170, "image/jpeg"},
		{"transparency stays PNG", "/logo.png", 100, 50, 100, "image/png"},
		{"never enlarged", "/small.webp", 256, 40, 20, "image/jpeg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			th, err := Thumbnail(f.ctx, f.s, f.fs, c.path, c.size)
			if err != nil {
				t.Fatal(err)
			}
			img, _ := decodeImage(t, th.Data)
			if th.ContentType != c.ct || img.Bounds().Dx() != c.w || img.Bounds().Dy() != c.h || !strings.HasPrefix(th.ETag, `"`) {
				t.Fatalf("%s %dx%d etag %s", th.ContentType, img.Bounds().Dx(), img.Bounds().Dy(), th.ETag)
			}
		})
	}
	// the second is the cache's, until the file changes
	before := f.s.Cache().Stats()
	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 256); err != nil {
		t.Fatal(err)
	}
	if after := f.s.Cache().Stats(); after.Hits <= before.Hits {
		t.Fatalf("no cache hit: %+v then %+v", before, after)
	}
	old, _ := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 256)
	f.put(t, "/photo.jpg", jpegOf(t, gradient(800, 1200, false)))
	th, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 256)
	if err != nil {
		t.Fatal(err)
	}
	if img, _ := decodeImage(t, th.Data); img.Bounds().Dx() != 170 || th.ETag == old.ETag {
		t.Fatalf("after a change: %dx%d, etag %s (was %s)", img.Bounds().Dx(), img.Bounds().Dy(), th.ETag, old.ETag)
	}

	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/notes.txt", 256); orchestrator.ErrorCode(err) != orchestrator.EUnsupportedMedia {
		t.Fatalf("text: %v", err)
	}
	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/broken.png", 256); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "/broken.png") {
		t.Fatalf("broken: %v", err)
	}
	if _, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", 4096); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("size 4096: %v", err)
	}
}

// TestPixelBound: an image whose header claims more than MaxPixels is
// refused before anything is decoded.
func TestPixelBound(t *testing.T) {
	f := newFixture(t, 0)
	// a PNG header of 10000 x 10000 (100 megapixels) over a tiny body
	b := pngOf(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	b = append([]byte(nil), b...)
	copy(b[16:24], []byte{0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10})
	binary.BigEndian.PutUint32(b[29:33], crc32.ChecksumIEEE(b[12:29])) // IHDR's checksum
	f.put(t, "/huge.png", b)
	err := f.call(t, "image_to_base64", map[string]any{"id": "/huge.png"}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "at most 50 megapixels") {
		t.Fatalf("err %v", err)
	}
	var info ImageInfo
	err = f.call(t, "image_info", map[string]any{"id": "/huge.png"}, &info)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("info of a huge image: %v %+v", err, info)
	}
}
